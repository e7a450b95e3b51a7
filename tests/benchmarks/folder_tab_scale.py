"""Benchmark: the Folder tab at scale (issue 50 items 2-3) — the real FolderPanel at 1280×720, offscreen, with the
bundled demo model on generated 32-px PNGs (tests/benchmarks/folder_scale.py's `make_images`), each step beside a
plain reference measured in the same run:

    python tests/benchmarks/folder_tab_scale.py --images 10000 [--work DIR]

- open: `open_folder` from a warm cache until the table holds every row, the map's points are drawn and the
  gallery's first screen is painted (then: until its thumbnails are decoded); reference: the same work without the
  GUI in the same process (`embed_folder` from the cache + `folder_results` + `project_2d`).
- lasso: an outline of 200 vertices (an ellipse of one standard deviation: ~40 % of the points) → the table, the
  gallery and the map repainted; reference: matplotlib's `Path.contains_points` on the same points. Box: the box
  moved → repainted.
- sort: the table sorted by confidence (the gallery follows) → repainted; reference: `np.argsort` of the column.
- pan: the map translated once per turn of the event loop for 3 s, frames painted per second (over 20k points the
  map is one raster: map_density.py); reference: a bare pyqtgraph PlotWidget of the same points in one
  ScatterPlotItem, the same loop.
- stalls: the longest gap between the beats of a 5-ms QTimer on the GUI thread while the folder opens from the cache
  and while it is embedded in the background with an empty cache (`--embed-seconds`, then cancelled); reference:
  the same heartbeat with nothing running.

Each open is timed twice: first with the thumbnails decoded (the embedding cache warm: run `vitstudio embed FOLDER`
with the same VITSTUDIO_CACHE_DIR first, or a first run fills it), then again with the thumbnails kept too.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _until(app, done, timeout: float = 600.0) -> float:
    start = time.perf_counter()
    while not done():
        app.processEvents()
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the Folder tab did not finish")
        time.sleep(0.001)
    return time.perf_counter() - start


class Heartbeat:
    """The longest gap between the beats of a QTimer on the GUI thread (a stall: nothing else can run)."""

    def __init__(self, interval_ms: int = 5) -> None:
        from PySide6.QtCore import QTimer

        self.timer = QTimer(interval=interval_ms, timeout=self._beat)
        self.last, self.longest = 0.0, 0.0

    def _beat(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now

    def __enter__(self):
        self.last, self.longest = time.perf_counter(), 0.0
        self.timer.start()
        return self

    def __exit__(self, *_) -> None:
        self.timer.stop()


def _idle(app) -> float:
    from vitstudio.gui import workers

    return _until(app, lambda: not workers.running_jobs())


def _painted(app, *widgets) -> None:
    app.processEvents()
    for w in widgets:
        w.repaint()


def _timed(app, action, *widgets) -> float:
    start = time.perf_counter()
    action()
    _painted(app, *widgets)
    return time.perf_counter() - start


def _fps(app, plot, seconds: float = 3.0) -> float:
    """Frames painted per second while the view is translated once per turn of the event loop (as a drag does: Qt
    paints the pending update once per turn); paint events counted on the viewport."""
    from PySide6.QtCore import QEvent, QObject

    class Counter(QObject):
        painted = 0

        def eventFilter(self, _obj, event) -> bool:  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Paint:
                self.painted += 1
            return False

    counter = Counter()
    plot.viewport().installEventFilter(counter)
    view = plot.getViewBox()
    (x0, x1), _ = view.viewRange()
    step, turns, start = (x1 - x0) / 200, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        view.translateBy(x=step if (turns // 100) % 2 == 0 else -step)
        app.processEvents()
        turns += 1
    plot.viewport().removeEventFilter(counter)
    return counter.painted / (time.perf_counter() - start)


def _open(app, panel, folder: str) -> dict:
    fm, t = panel.folder_model, {}
    start = time.perf_counter()
    with Heartbeat() as beat:
        panel.open_folder(folder)
        _until(app, lambda: fm.results is not None and panel.table_model.rowCount() == len(fm.results))
        t["table"] = time.perf_counter() - start
        _until(app, lambda: fm.coords is not None and panel.side.page("map").map.drawn())
        _painted(app, panel.side.page("map").map.viewport(), panel.gallery.viewport())
        t["map + grid drawn"] = time.perf_counter() - start
        gallery = panel.gallery.model()
        shown = [i for i in range(min(gallery.rowCount(), 60))
                 if panel.gallery.viewport().rect().intersects(panel.gallery.visualRect(gallery.index(i, 0)))]
        _until(app, lambda: all(gallery.data(gallery.index(i, 0), 1) is not None for i in shown))
        t["grid's thumbnails"] = time.perf_counter() - start
        _idle(app)
        t["model fit (OOD) done"] = time.perf_counter() - start
    t["longest GUI stall"] = beat.longest
    return t


def _embedding_stall(app, panel, folder: str, seconds: float, work: Path) -> tuple[float, float, int]:
    """(longest GUI-thread gap while `folder` is embedded with an empty cache for `seconds`, the same with nothing
    running, images embedded by then)."""
    with Heartbeat() as idle:
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            app.processEvents()
            time.sleep(0.001)
    os.environ["VITSTUDIO_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold-", dir=work)
    panel.folder_model.forget()
    panel.view_state.paths = ()
    done = [0]
    panel.folder_model.progress.connect(lambda p: done.__setitem__(0, p.done))
    with Heartbeat() as beat:
        panel.open_folder(folder)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            app.processEvents()
            time.sleep(0.001)
    panel.folder_model.cancel()
    _idle(app)
    return beat.longest, idle.longest, done[0]


def _reference_open(folder: str, model) -> float:
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.folder.neighbours import project_2d
    from vitstudio.core.folder.results import folder_results

    start = time.perf_counter()
    gen = embed_folder(model, [folder])
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        embedded = stop.value
    folder_results(embedded, [folder])
    project_2d(embedded.view())
    return time.perf_counter() - start


def _reference_fps(app, coords: np.ndarray) -> float:
    import pyqtgraph as pg

    plot = pg.PlotWidget()
    plot.resize(600, 460)
    plot.show()
    plot.addItem(pg.ScatterPlotItem(pos=coords, size=7, pen=None, brush=pg.mkBrush(200, 80, 80)))
    _painted(app, plot.viewport())
    fps = _fps(app, plot)
    plot.close()
    return fps


def _interactions(app, panel) -> list[tuple[str, float, str, float]]:
    from matplotlib.path import Path as MplPath

    fm, coords = panel.folder_model, panel.folder_model.coords
    views = (panel.table.viewport(), panel.gallery.viewport(), panel.side.page("map").map.viewport())
    centre, spread = coords.mean(0), coords.std(0)
    outline = np.array([centre + spread * (np.cos(a), np.sin(a)) for a in np.linspace(0, 2 * np.pi, 200)])
    t_ref = time.perf_counter()
    held = MplPath(outline).contains_points(coords.astype(np.float64)).sum()
    ref_lasso = time.perf_counter() - t_ref
    lasso = _timed(app, lambda: fm.select_lasso(outline), *views)
    assert len(fm.rows) == held, (len(fm.rows), held)
    x, y, w, h = fm.box
    box = _timed(app, lambda: fm.move_box(x + w / 4, y, w, h), *views)
    fm.reset_filters()
    _painted(app, *views)
    t_ref = time.perf_counter()
    np.argsort(fm.results.confidence, kind="stable")
    ref_sort = time.perf_counter() - t_ref
    from PySide6.QtCore import Qt

    sort = _timed(app, lambda: panel.table.sortByColumn(3, Qt.DescendingOrder), *views)
    return [("lasso filter (table + grid + map repainted)", lasso, "matplotlib Path.contains_points", ref_lasso),
            ("box filter (same)", box, "matplotlib Path.contains_points", ref_lasso),
            ("sort by confidence (same)", sort, "np.argsort of the column", ref_sort)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--work", help="images and caches (kept between runs); default: a temporary folder")
    parser.add_argument("--embed-seconds", type=float, default=30.0, help="how long the background embedding is "
                        "watched for GUI stalls (0: not measured)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="vitstudio-tab-"))
    os.environ.setdefault("VITSTUDIO_CACHE_DIR", str(work / "cache"))
    os.environ.setdefault("VITSTUDIO_DATA_DIR", str(work / "data"))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from tests.benchmarks.folder_scale import make_images
    from vitstudio.app.app import App
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model
    from vitstudio.gui import workers
    from vitstudio.gui.folder.folder_panel import FolderPanel
    from vitstudio.gui.imaging import configure_pyqtgraph

    app = QApplication.instance() or QApplication([])
    configure_pyqtgraph()
    workers.collect_garbage_on_gui_thread()  # as the window does (else a worker's collection lands anywhere)
    folder = str(make_images(work, args.images))
    model = load_model(str(bundled_demo()), device="cpu", precision="fp32")
    app_model = App(workers.QT_RUNNER)
    state = app_model.state
    panel = FolderPanel(app_model)
    panel.resize(1280, 720)
    panel.show()
    state.set_model(model)
    panel.view_state.gallery = True  # the grid is what is drawn (the table's model holds the same rows)
    first = _open(app, panel, folder)  # the thumbnails decoded now (the embeddings: cached before, or now)
    panel.folder_model.forget()
    panel.view_state.paths = ()
    again = _open(app, panel, folder)  # thumbnails kept as pixmaps too
    reference = _reference_open(folder, model)
    ref_name = "embed_folder (cache) + folder_results + project_2d"
    rows = [(f"open: {k}", v, ref_name, reference) for k, v in first.items()]
    rows += [(f"open again: {k}", v, ref_name, reference) for k, v in again.items()]
    rows += _interactions(app, panel)
    pan, bare = _fps(app, panel.side.page("map").map), _reference_fps(app, panel.folder_model.coords)
    drawn = "one raster" if panel.side.page("map").map.density.shown else "a group per colour"
    rows.append((f"map panning, frames/s ({drawn})", pan, "bare PlotWidget, one ScatterPlotItem", bare))
    if args.embed_seconds:
        stall, idle, done = _embedding_stall(app, panel, folder, args.embed_seconds, work)
        rows.append((f"longest GUI stall, embedding ({done} in {args.embed_seconds:.0f} s)", stall,
                     "the same heartbeat, nothing running", idle))
    print(f"{args.images} images, the Folder tab at 1280×720 (offscreen)")
    print(f"{'step':<48} {'s or fps':>9}   {'reference':<52} {'s or fps':>9}  ratio")
    for name, t, ref_name, ref in rows:
        print(f"{name:<48} {t:>9.3f}   {ref_name:<52} {ref:>9.3f}  {t / max(ref, 1e-9):5.2f}×")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    workers.shutdown(5000)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
