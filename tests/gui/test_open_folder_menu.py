"""File → Open folder and drops of many files on the window: the strip and every view of its images follow them in
batches, linearly (a view that refilled its list per image made a folder's open quadratic: 1k images froze the
window for 6 s, 3k for 48 s), and the strip takes at most STRIP_FROM_FOLDER images of a folder the Folder tab opens."""

from __future__ import annotations

import time

import numpy as np
from PIL import Image
from PySide6.QtCore import QTimer

from vitstudio.gui import main_window

N_DROPPED = 600


def _tiny_folder(root, n: int):
    root.mkdir()
    pixels = np.random.default_rng(0).integers(0, 255, (n, 8, 8, 3), np.uint8)
    for i in range(n):
        Image.fromarray(pixels[i]).save(root / f"{i:05d}.png")
    return root


class _StallMeter:
    """The longest gap between ticks of a 20-ms timer on the GUI thread: how long the window stopped answering."""

    def __init__(self) -> None:
        self.last, self.longest = time.perf_counter(), 0.0
        self.timer = QTimer(interval=20, timeout=self._tick)
        self.timer.start()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.longest, self.last = max(self.longest, now - self.last), now


def test_a_drop_of_many_images_fills_the_strip_and_match_in_batches_without_a_stall(window, qtbot, tmp_path):
    """A folder of 600 images dropped on the window: every image in the strip and in Match's image-B list, in
    far fewer events than images, with no stall of the GUI thread beyond a second (it was minutes-long and grew
    with the square of the count)."""
    folder = _tiny_folder(tmp_path / "many", N_DROPPED)
    events = []
    window.state.images_added.connect(events.append)
    meter = _StallMeter()
    window.add_paths([str(folder)])
    qtbot.waitUntil(lambda: len(window.state.images) == N_DROPPED, timeout=60000)
    meter.timer.stop()
    other = window.compare.match.other
    assert window.strip.count() == N_DROPPED
    assert sorted(other.itemData(i) for i in range(other.count())) == sorted(e.path for e in window.state.images)
    assert sum(len(e) for e in events) == N_DROPPED and len(events) < N_DROPPED / 10
    assert meter.longest < 1.0, f"the GUI thread stalled {meter.longest:.2f} s"


def test_open_folder_puts_the_first_images_in_the_strip_and_says_the_folder_tab_has_all(window, qtbot, tmp_path,
                                                                                        monkeypatch):
    """File → Open folder over the strip's limit: the strip takes the first STRIP_FROM_FOLDER images (each is held
    decoded), says so, and the Folder tab is given the whole folder."""
    monkeypatch.setattr(main_window, "STRIP_FROM_FOLDER", 40)
    folder = _tiny_folder(tmp_path / "big", 100)
    window.open_folder(str(folder))
    qtbot.waitUntil(lambda: "Opened" in window.log_view.toPlainText(), timeout=30000)
    said = window.log_view.toPlainText().splitlines()
    assert len(window.state.images) == 40
    assert [e.path for e in window.state.images] == [str(folder / f"{i:05d}.png") for i in range(40)]
    assert any("Opened the first 40 images" in t and "Folder tab shows every image" in t for t in said)
    assert window.folder.folder_model.waiting_paths == [str(folder)]  # no model yet: the tab opens it on the first
