"""The Folder tab's safeguards for large folders (issue 50, the tab at 100k images), checked on small ones: the map
drawn as one raster past a number of points, a model fit that stops between blocks when the panel closes."""

from __future__ import annotations

import threading
import time

import numpy as np
from matplotlib.path import Path
from PIL import Image

from tests.gui.helpers import drag_on_map
from vitstudio.core.models.demo import bundled_demo


def _pixels(item, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the image pixels under map points: the ImageItem's rect, row 0 at its bottom edge."""
    rect, (h, w) = item.mapRectToParent(item.boundingRect()), item.image.shape[:2]
    return (np.floor((xy[:, 1] - rect.top()) / rect.height() * h).astype(int),
            np.floor((xy[:, 0] - rect.left()) / rect.width() * w).astype(int))


def test_a_map_of_many_points_is_one_raster_that_the_lasso_selects_through(qtbot, monkeypatch):
    """Past DENSE_ABOVE points (patched to 100; 400 normal points in two colour groups) the map holds no scatter item
    but one image: every point's pixel (mapped through the ImageItem's rect) has its group's colour, the group drawn
    last on top everywhere, a point with no other within 8 screen px the least opacity (MIN_ALPHA) and piled-up dots
    more; recoloured groups redraw it; a lasso dragged over the raster selects in the Folder model exactly matplotlib's
    Path over all 400 points. [widget]
    """
    from vitstudio.app.app_state import AppState
    from vitstudio.app.folder_model import FolderModel
    from vitstudio.app.jobs import ScriptRunner
    from vitstudio.core.folder.results import FolderResults
    from vitstudio.gui import workers
    from vitstudio.gui.folder import folder_map
    from vitstudio.gui.folder.map_density import MIN_ALPHA

    monkeypatch.setattr(folder_map, "DENSE_ABOVE", 100)  # 400 points stand for 100k
    coords = np.random.default_rng(0).normal(size=(400, 2)).astype(np.float32)
    left = np.flatnonzero(coords[:, 0] < 0)
    right = np.flatnonzero(coords[:, 0] >= 0)
    red, blue = (220, 0, 0), (0, 0, 220)
    plot = folder_map.FolderMapWidget()
    qtbot.addWidget(plot)
    plot.resize(600, 460)
    plot.show()
    plot.set_points(coords, [("left", red, left), ("right", blue, right)], "pca")
    qtbot.waitUntil(plot.drawn)
    assert not plot.items and plot.density.shown  # no scatter item: one image
    image = plot.density.image.image
    rows, cols = _pixels(plot.density.image, coords)
    on_screen = np.hypot(*((coords[:, None] - coords[None]) / plot.getViewBox().viewPixelSize()).transpose(2, 0, 1))
    alone = (on_screen + np.eye(len(coords)) * 1e9).min(1) > 8  # no other dot within its own 7 px
    for group, rgb in ((left, red), (right, blue)):
        assert (image[rows[group], cols[group], :3] == rgb).all(1)[alone[group]].all()
        assert (image[rows[group], cols[group], 3][alone[group]] == MIN_ALPHA).all()  # one dot: the least opaque
    assert (image[rows[right], cols[right], :3] == blue).all()  # drawn last: on top, alone or not
    assert alone.sum() > 20 and (image[..., 3] > MIN_ALPHA).any()  # some dots pile up: more opaque there

    plot.set_groups([("left", blue, left), ("right", red, right)])  # coloured by another field
    qtbot.waitUntil(lambda: plot.drawn() and plot.density.image.image is not image)
    rows, cols = _pixels(plot.density.image, coords)
    assert (plot.density.image.image[rows[right], cols[right], :3] == red).all()

    # the lasso drawn on the raster selects among all 400 points (the Folder model's), not what is drawn
    fm = FolderModel(AppState(), ScriptRunner())
    fm.results = FolderResults(tuple(f"/f/{i}.png" for i in range(400)), ("",) * 400, np.zeros(400, int),
                               np.ones(400, np.float32), np.ones(400, np.float32), ("x",))
    fm.coords = coords
    plot.lasso_drawn.connect(fm.select_lasso)
    plot.set_lasso(True)
    drag_on_map(plot, [(np.cos(a), np.sin(a)) for a in np.linspace(0, 2 * np.pi, 40)])
    outline = np.asarray(plot.lasso._drawn)
    inside = np.flatnonzero(Path(outline).contains_points(coords.astype(np.float64)))
    assert 100 < len(inside) < 300 and fm.rows.tolist() == inside.tolist()
    assert workers.shutdown(5000)  # the rasters are drawn off the GUI thread


def test_closing_the_panel_mid_fit_stops_the_fit_between_blocks(panel, qtbot, tmp_path, monkeypatch, capfd):
    """With the model fit's kNN slowed to one query per 0.4 s block (10 images: 4 s), closing the panel mid-fit (once
    the brain-scores job beside it is done), `workers.shutdown(1000)` returns with every job done, at most the block
    under way run after the close, nothing delivered and no traceback or "Signal source has been deleted" on stderr
    (without the cancel check between blocks shutdown times out). [panel]
    """
    from vitstudio.core.models import ood
    from vitstudio.gui import workers
    from vitstudio.gui.folder.folder_panel import FolderPanel

    started, blocks, real = threading.Event(), [], ood._kth_distances

    def slow(*args):  # one query per block, 0.4 s each: the fit of 10 images would take 4 s (100k images: seconds)
        blocks.append(len(args[0]))
        started.set()
        time.sleep(0.4)
        return real(*args)

    monkeypatch.setattr(ood, "BLOCK_QUERIES", 1)
    monkeypatch.setattr(ood, "_kth_distances", slow)
    folder = panel(FolderPanel, model=bundled_demo())
    for i in range(10):  # ten images in two class folders (render_digits would import scikit-learn: 2 s)
        (tmp_path / "f" / str(i % 2)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (32, 32, 3), np.uint8)).save(
            tmp_path / "f" / str(i % 2) / f"{i}.png")
    folder.open_folder(str(tmp_path / "f"))
    qtbot.waitUntil(started.is_set, timeout=30000)  # the fit runs (after the map)
    qtbot.waitUntil(lambda: folder.folder_model.scores is not None, timeout=30000)  # the job beside it is done
    assert folder.folder_model.fit is None and len(blocks) < 10  # the fit is not
    folder.close()
    at_close = len(blocks)
    assert workers.shutdown(1000)  # every thread done within the second: the fit left at its next block
    assert not workers.running_jobs()
    assert len(blocks) <= at_close + 1 < 10 and set(blocks) == {1}  # the block under way ended it
    assert folder.folder_model.fit is None  # nothing delivered from the cancelled fit
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Signal source has been deleted" not in err


def test_gallery_cells_carry_the_fit_and_review_flags(qtbot, tmp_path):
    """On a gallery of 6 images, the model fit's out-of-distribution flags and the label review's doubted images
    (flagged, or another class suggested; not one whose suggestion is its label) are each cell's flags (rows 0: unlike,
    2: unlike + doubted, 3: doubted), the tooltip says what the review suggests, each flag is a disc of its colour over
    the cell's top-left corner in the grabbed viewport and no flag colour is drawn where there is none; another folder
    drops them. [widget]
    """
    from types import SimpleNamespace

    from PySide6.QtCore import Qt

    from vitstudio.core.folder.label_review import LabelIssue
    from vitstudio.core.folder.results import FolderResults
    from vitstudio.gui.folder.folder_gallery import FLAGS, FLAGS_ROLE, FolderGalleryView
    from vitstudio.gui.folder.folder_table import ResultsModel

    paths = [str(tmp_path / f"{i}.png") for i in range(6)]
    for p in paths:
        Image.new("RGB", (8, 8), (200, 200, 200)).save(p)
    table = ResultsModel()
    view = FolderGalleryView(table)
    qtbot.addWidget(view)
    view.resize(400, 300)
    view.show()
    table.set_results(FolderResults(tuple(paths), ("a",) * 6, np.zeros(6, int), np.full(6, 0.9, np.float32),
                                    np.full(6, 0.5, np.float32), ("a", "b")))
    cells = view.gallery_model
    cells.show_fit(SimpleNamespace(scores=SimpleNamespace(flagged=np.array([1, 0, 1, 0, 0, 0], bool))))
    cells.show_review(SimpleNamespace(label_issues=[  # flagged; another class suggested; neither (not doubted)
        LabelIssue(paths[2], "a", "b", 0.1, 0.2, True), LabelIssue(paths[3], "a", "b", 0.3, 0.4),
        LabelIssue(paths[4], "a", "a", 0.9, 0.9)]))
    expected = {0: ("unlike",), 2: ("unlike", "doubted"), 3: ("doubted",)}
    assert [cells.data(cells.index(r, 0), FLAGS_ROLE) for r in range(6)] == [expected.get(r, ()) for r in range(6)]
    assert cells.data(cells.index(3, 0), Qt.ToolTipRole).endswith("doubts its label: looks like b")
    image = view.viewport().grab().toImage()
    for r in range(6):  # each flag a disc in its colour over the cell's top-left corner, in order; none elsewhere
        rect = view.visualRect(cells.index(r, 0))
        drawn = [image.pixelColor(rect.left() + 5 + 17 * i, rect.top() + 10).getRgb()[:3] for i in range(2)]
        wanted = [FLAGS[f][1].getRgb()[:3] for f in expected.get(r, ())]
        assert drawn[:len(wanted)] == wanted and not {c for c in drawn[len(wanted):]} & {
            f[1].getRgb()[:3] for f in FLAGS.values()}
    table.set_results(None)  # another folder: its flags go
    assert not len(cells.unlike) and not cells.doubted
