"""The window's settings are the data folder's, not the user's Qt file (issue 29, item 2), and a window fits its
screen, the first time and after a restart from a bigger screen (item 3), growing when it was saved on another."""

from __future__ import annotations

import os

SPEC = "vit_tiny_patch16_224"


def test_window_settings_live_in_the_data_folder(window, qtbot, tmp_path, monkeypatch):
    """What the window remembers (model, device, recent files, geometry, a model's classes) is written to the data
    folder's settings.ini and nowhere in Qt's per-user folder; another data folder starts without it.

    [window]
    """
    from vitstudio.core import files
    from vitstudio.gui.app_settings import FILE_NAME, app_settings
    from vitstudio.gui.common.classes_box import remember, remembered

    window.settings.setValue("model", "the user's model")
    remember(SPEC, "cat, dog", "a photo of a {}")
    window.close()  # saves the geometry
    window.settings.sync()
    assert (files.data_dir() / FILE_NAME).is_file()
    assert app_settings().value("model") == "the user's model" and app_settings().value("geometry") is not None
    user_qt = tmp_path / "settings"  # where Qt's default per-user file goes in this test (conftest)
    assert not user_qt.exists() or not [p for p in user_qt.rglob("*") if p.is_file()]
    monkeypatch.setenv("VITSTUDIO_DATA_DIR", str(tmp_path / "another instance"))
    assert app_settings().value("model") is None and remembered(SPEC) is None


def test_the_strip_opens_again_after_a_restart(window, qtbot, photos, tmp_path):
    """The walk: after a restart the strip was empty (model, folder, form and runs came back). What was open at the
    close opens again, less what is gone since; images given on the command line are opened instead.

    [window + frames]
    """
    import shutil

    from vitstudio.gui.app import _open_frame, parse_args

    kept, gone = str(photos["chelsea"]), str(shutil.copy(photos["astronaut"], tmp_path / "gone.jpg"))
    window.add_paths([kept, gone])
    qtbot.waitUntil(lambda: len(window.state.images) == 2, timeout=10000)
    window.close()
    os.remove(gone)
    again = _open_frame(parse_args([]))
    qtbot.addWidget(again)
    qtbot.waitUntil(lambda: len(again.state.images) == 1, timeout=10000)
    assert [e.path for e in again.state.images] == [kept]
    given = _open_frame(parse_args([str(photos["astronaut"])]))
    qtbot.addWidget(given)
    qtbot.waitUntil(lambda: len(given.state.images) == 1, timeout=10000)
    assert [e.path for e in given.state.images] == [str(photos["astronaut"])]


def test_a_one_item_list_reads_back_as_a_list(tmp_path, monkeypatch, qapp):
    """INI keeps ["a"] as the line `recent=a`, which a fresh reader (the next start) gets back as the string "a":
    Open recent must not offer "a" letter by letter."""
    from PySide6.QtCore import QSettings

    from vitstudio.gui.app_settings import list_value

    path = tmp_path / "s.ini"
    path.write_text("[General]\nrecent=/images/one folder\nnone=\n")
    settings = QSettings(str(path), QSettings.IniFormat)
    assert list_value(settings, "recent") == ["/images/one folder"]
    assert list_value(settings, "missing") == []
    settings.setValue("two", ["a", "b"])
    assert list_value(settings, "two") == ["a", "b"]


SCREEN_CHECK = r"""
import json, sys
from PySide6.QtWidgets import QApplication, QDockWidget
from vitstudio.gui.main_window import MainWindow

app = QApplication([])
room = app.primaryScreen().availableGeometry()
def inside(w):
    g = w.frameGeometry()
    return [g.x(), g.y(), g.width(), g.height(), room.contains(g)]
def docks(w):
    card = w.findChild(QDockWidget, "model_card_dock")
    return {"log_behind_card": [d.objectName() for d in w.tabifiedDockWidgets(card)] == ["log_dock"],
            "card_shown": not card.visibleRegion().isEmpty(), "central_h": w.centralWidget().height()}
first = MainWindow(panels=False)  # the frame: built from Qt alone, with the geometry of the settings
first.show()
app.processEvents()
out = {"first": inside(first), "first_docks": docks(first)}
first.resize(1900, 1150)
first.move(300, 200)
app.processEvents()
first.close()  # remembered at 1900x1150, as on a bigger screen
again = MainWindow(panels=False)
again.show()
app.processEvents()
out["restarted"] = inside(again)
out["restarted_docks"] = docks(again)
again.resize(1030, 480)  # a small window on a bigger screen
again.close()
again.settings.setValue("geometry_screen", "1920x1040")
small = MainWindow(panels=False)
small.show()
app.processEvents()
out["small_elsewhere"] = inside(small)
small.resize(1030, 480)
small.close()  # small on this very screen: the user's choice, kept
kept = MainWindow(panels=False)
kept.show()
app.processEvents()
out["small_here"] = inside(kept)
out["room"] = [room.width(), room.height()]
out["torch"] = "torch" in sys.modules  # four frames built, shown and closed: Qt alone
print(json.dumps(out))
"""


def _screen_check(tmp_path, width: int, height: int) -> dict:
    """SCREEN_CHECK on an offscreen screen of width×height with window frames (Qt's offscreen config file), in a
    process of its own."""
    import json
    import subprocess
    import sys

    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"windowFrameMargins": True, "screens": [
        {"name": "s", "x": 0, "y": 0, "width": width, "height": height, "logicalDpi": 96, "logicalBaseDpi": 96,
         "dpr": 1}]}))
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}",
           "VITSTUDIO_DATA_DIR": str(tmp_path / "data")}
    res = subprocess.run([sys.executable, "-c", SCREEN_CHECK], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_a_window_fits_a_1280_by_720_screen_first_and_after_a_restart(tmp_path):
    """The first window was 1280×820 on a 1280×720 screen: its status bar (and the error button) off the screen.
    The first window, and one restored from a geometry saved on a bigger screen, lie inside the available area.
    And on such a short screen the Log starts as a tab behind the Model card (along the bottom it took ~110 px from
    every tab: the walk's "cramped views"); the restart keeps it there. A geometry saved on another screen, bigger
    or smaller, fills this one. The frame is built from Qt alone: the process never imports torch (main() would
    import it on the GUI thread before the first paint, not on its worker).

    [subprocess]
    """
    from vitstudio.gui.screen_fit import FRAME_GUESS

    out = _screen_check(tmp_path, 1280, 720)
    assert out["first"][4] and out["restarted"][4], out
    assert out["torch"] is False, out
    assert out["first"][2] >= 1200 and out["first"][3] >= 600, out  # fitted, not shrunk to nothing
    assert out["first_docks"]["log_behind_card"] and out["first_docks"]["card_shown"], out
    assert out["restarted_docks"]["log_behind_card"] and out["restarted_docks"]["card_shown"], out
    assert out["first_docks"]["central_h"] >= 560, out  # was ~470 with the Log along the bottom
    # A window saved on a bigger screen reopened at 1030×480 here, its tabs scrolling: a geometry saved bigger than
    # the screen, or small on another screen, fills the available area (less the frame kept free before the window
    # is shown); a window made small on this very screen stays the size its user chose.
    room_w, room_h = out["room"]
    for key in ("restarted", "small_elsewhere"):
        x, y, w, h, inside = out[key]
        assert inside and w >= room_w - FRAME_GUESS[0] and h >= room_h - FRAME_GUESS[1], (key, out)
    assert out["small_here"][4] and out["small_here"][2] < 1100 and out["small_here"][3] < 520, out


def test_on_a_tall_screen_the_log_stays_along_the_bottom(tmp_path):
    """On a 1920×1200 screen the first window keeps the Log along the bottom, the Model card shown. [subprocess]"""
    out = _screen_check(tmp_path, 1920, 1200)
    assert not out["first_docks"]["log_behind_card"] and out["first_docks"]["card_shown"], out
