"""Benchmark: File → Open folder beside the Folder tab's own Open folder, on a folder whose embeddings are cached —
the real window at 1280×720, offscreen, with the bundled demo model on generated 32-px PNGs
(tests/benchmarks/folder_scale.py's `make_images`):

    python tests/benchmarks/open_folder_menu.py --images 10000 [--work DIR]

Both are timed until the Folder tab's table holds every row, its map is drawn and no job runs (the menu's open also
fills the image strip with the folder's first images: main_window.STRIP_FROM_FOLDER); the longest gap between the
beats of a 5-ms timer on the GUI thread is each one's longest stall. The reference is the Folder tab's own open,
measured in the same run (a first open, not timed, fills the cache). Before the strip followed a folder in batches,
the menu's open froze the window: quadratic in the images (2,960: 48 s, a 41-s stall; 100k: nothing after 7 min)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _open(app, window, folder: str, menu: bool) -> tuple[float, float]:
    from tests.benchmarks.folder_tab_scale import Heartbeat, _idle, _until

    panel, state = window.folder, window.state
    start = time.perf_counter()
    with Heartbeat() as beat:
        (window.open_folder if menu else panel.open_folder)(folder)
        fm = panel.folder_model
        _until(app, lambda: fm.results is not None and panel.table_model.rowCount() == len(fm.results))
        _until(app, lambda: fm.coords is not None and panel.side.page("map").map.drawn())
        if menu:
            _until(app, lambda: len(state.images) >= 1)
        _idle(app)
    return time.perf_counter() - start, beat.longest


def _forget(window) -> None:
    window.folder.folder_model.forget()
    window.folder.view_state.paths = ()
    window.state.remove_images(list(window.state.images))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--work", help="images and caches (kept between runs); default: a temporary folder")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="vitstudio-menu-"))
    os.environ.setdefault("VITSTUDIO_CACHE_DIR", str(work / "cache"))
    os.environ.setdefault("VITSTUDIO_DATA_DIR", str(work / "data"))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from tests.benchmarks.folder_scale import make_images
    from tests.benchmarks.folder_tab_scale import _until
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.gui import workers
    from vitstudio.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    folder = str(make_images(work, args.images))
    window = MainWindow()
    window.resize(1280, 720)
    window.show()
    window.request_model(str(bundled_demo()), "cpu", "fp32")
    _until(app, lambda: window.state.model is not None)
    window.show_tab("folder")
    _open(app, window, folder, menu=False)  # the cache filled (or found full)
    rows = []
    for _ in range(args.repeats):
        for menu in (False, True):
            _forget(window)
            seconds, stall = _open(app, window, folder, menu)
            rows.append((menu, seconds, stall, len(window.state.images)))
    tab = min(s for m, s, _, _ in rows if not m)
    menu_best = min(s for m, s, _, _ in rows if m)
    print(f"{args.images} images, demo model, warm cache, offscreen 1280x720")
    for menu, seconds, stall, strip in rows:
        name = "File > Open folder" if menu else "Folder tab's Open folder (reference)"
        print(f"  {name:40s} {seconds:7.2f} s   longest GUI stall {stall:5.2f} s   strip {strip}")
    print(f"  ratio (best of each): {menu_best / tab:.2f}x the Folder tab's own open")
    window.close()
    workers.shutdown(10000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
