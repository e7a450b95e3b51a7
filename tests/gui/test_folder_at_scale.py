"""The Folder tab's safeguards for large folders (issue 50, the tab at 100k images), checked on small ones: a model
fit that stops between blocks when the panel closes."""

from __future__ import annotations

import threading
import time

from vitstudio.core.models.demo import bundled_demo, render_digits


def test_closing_the_panel_mid_fit_stops_the_fit_between_blocks(panel, qtbot, tmp_path, monkeypatch, capfd):
    from vitstudio.core.models import ood
    from vitstudio.gui import workers
    from vitstudio.gui.folder.folder_panel import FolderPanel

    started, blocks, real = threading.Event(), [], ood._kth_distances

    def slow(*args):  # one query per block, 0.2 s each: the fit of 10 images would take 2 s (100k images: seconds)
        blocks.append(len(args[0]))
        started.set()
        time.sleep(0.2)
        return real(*args)

    monkeypatch.setattr(ood, "BLOCK_QUERIES", 1)
    monkeypatch.setattr(ood, "_kth_distances", slow)
    folder = panel(FolderPanel, model=bundled_demo())
    folder.open_folder(str(render_digits(tmp_path / "digits", per_class=1)))
    qtbot.waitUntil(started.is_set, timeout=30000)  # the fit runs (after the map)
    folder.close()
    start = time.perf_counter()
    assert workers.shutdown(1000)  # every thread done within the second: the fit left at its next block
    assert time.perf_counter() - start < 0.5 and not workers.running_jobs()
    assert 1 <= len(blocks) < 5 and set(blocks) == {1}  # stopped after a block or two of its 10
    assert folder.folder_model.fit is None  # nothing delivered from the cancelled fit
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Signal source has been deleted" not in err
