"""The Folder tab's Paint page, driven with no Qt (issue 52): drags of the pointer painted on three digits of a folder
(each drag one undo step), the image on screen segmented after each, the folder segmented, one image corrected (the
folder follows), the masks exported — and `vitstudio segment` on the exported painted masks writes the same masks; an
export inside the dataset folder is refused; another model drops every segmentation and keeps the paint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vitstudio.app.app_state import AppState
from vitstudio.app.folder_model import FolderModel
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.pages.paint import PaintPageModel
from vitstudio.app.paint_masks import UNPAINTED
from vitstudio.cli import main
from vitstudio.core.models.demo import bundled_demo, render_digits


@pytest.fixture(scope="module")
def demo():
    from vitstudio.core.models.loading import load_model

    return load_model(str(bundled_demo()), None, "cpu", "fp32")


def _drag(page: PaintPageModel, points, brush_class: int, radius: int) -> None:
    page.paint.state.update(brush_class=brush_class, radius=radius, erase=False)
    page.press(*points[0])
    for x, y in points[1:]:
        page.drag(x, y)
    page.release()


def _paint_digit(page: PaintPageModel, folder: FolderModel, path: str) -> None:
    """The digit's ink as the object (a drag along its dark pixels' middle row), the paper's margin as background."""
    folder.select(folder.results.paths.index(path))
    ink = page.picture.mean(-1) < 128
    ys, xs = np.nonzero(ink)
    row = int(np.median(ys))
    _drag(page, [(x, row) for x in range(int(xs[ys == row].min()), int(xs[ys == row].max()) + 1, 2)], 1, 1)
    _drag(page, [(0, 0), (31, 0), (31, 31), (0, 31), (0, 0)], 0, 1)


def paint_page_on_digits(demo, tmp_path):
    """A Paint page on a digits folder (one per class) opened through the demo, run in the caller's thread."""
    data = render_digits(tmp_path / "digits", 1)
    app = AppState()
    app.set_model(demo)
    folder = FolderModel(app, ScriptRunner())
    page = PaintPageModel(folder)
    folder.open_paths([str(data)])
    return app, folder, page, sorted(folder.results.paths)


def test_paint_segment_correct_export_and_the_cli_agrees(demo, tmp_path, capsys):
    """A drag is one undo step (undo takes the whole background drag, redo gives it back exactly); the image on screen
    is segmented after each drag with its own paint standing and class areas summing to 1, and nothing is shown while a
    class is unpainted; the folder segmented from three painted digits, a fourth painted re-segments it; an export
    inside the dataset folder is refused in the page's words and writes nothing; the line gives the folder's mean class
    areas; the export's masks equal `vitstudio segment` on its painted/ folder and the page's own view of the corrected
    image; a page built later opens the exported painted/ as the same masks, and refuses a folder whose PNG names no
    image; another model drops every segmentation and keeps the paint.
    """
    app, folder, page, paths = paint_page_on_digits(demo, tmp_path)
    data = Path(folder.folder)
    assert page.line.startswith("Select an image")

    _paint_digit(page, folder, paths[0])
    assert len(page.paint.undo_steps) == 2  # two drags, two undo steps (each painted as the pointer moved)
    shown = page.shown
    painted = page.paint.mask(paths[0])
    assert shown.image == paths[0] and shown.labels.shape == (32, 32) == painted.shape
    assert (shown.labels[painted != UNPAINTED] == painted[painted != UNPAINTED]).all()  # its own paint stands
    assert set(page.areas()) == {"background", "object"} and abs(sum(page.areas().values()) - 1) < 1e-6
    painted = painted.copy()
    page.undo()  # the whole background drag goes, the object's stays
    assert set(np.unique(page.paint.mask(paths[0]))) == {1, UNPAINTED} and page.shown is None  # nothing to vote
    assert page.line.startswith("Paint some background")
    page.redo()
    assert (page.paint.mask(paths[0]) == painted).all() and page.shown is not None and page.shown.bank > 0
    for path in paths[1:3]:
        _paint_digit(page, folder, path)

    assert page.segment_folder() and len(page.segmented.images) == len(paths)
    assert page.segmented_revision == page.state.revision
    _paint_digit(page, folder, paths[5])  # a correction: the folder is segmented again from four painted images
    assert page.segmented.painted == 4 and page.segmented_revision == page.state.revision
    mean_object = np.mean([image.shares["object"] for image in page.segmented.images])
    assert f"object {mean_object:.0%} of the pixels on average" in page.line

    assert not page.export(str(data / "masks"))  # the core's rule: masks inside the folder would join its images
    assert "inside the folder" in page.line and not (data / "masks").exists()
    assert page.line.endswith("Choose a folder outside it.")
    assert page.export(str(tmp_path / "out"))
    assert page.line.startswith(f"Exported {len(paths)} masks")
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"masks.coco.json", "areas.csv", "painted"}
    assert sorted(p.stem for p in (tmp_path / "out" / "painted").iterdir()) == sorted(
        Path(p).stem for p in [*paths[:3], paths[5]])
    code = main(["segment", str(data), "--model", str(bundled_demo()), "--masks", str(tmp_path / "out" / "painted"),
                 "--out", str(tmp_path / "cli"), "--quiet", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    for path in paths:
        stem = f"{Path(path).stem}.png"
        ours, theirs = (np.asarray(Image.open(tmp_path / side / stem)) for side in ("out", "cli"))
        assert (ours == theirs).all()
    exported = np.asarray(Image.open(tmp_path / "out" / f"{Path(paths[5]).stem}.png"))
    assert (exported == page.shown.labels).all()  # the page showed what it exported

    reopened = PaintPageModel(folder)  # the exported paint opened again (a later session): the same masks
    (tmp_path / "stray").mkdir()
    Image.new("L", (32, 32)).save(tmp_path / "stray" / "not-in-the-folder.png")
    assert not reopened.open_painted(str(tmp_path / "stray")) and "names no image" in reopened.line
    assert reopened.open_painted(str(tmp_path / "out" / "painted"))
    assert sorted(reopened.paint.painted()) == sorted(page.paint.painted())
    assert all((reopened.paint.mask(p) == page.paint.mask(p)).all() for p in page.paint.painted())

    app.set_model(load_other(demo))  # another model: no segmentation of the demo's stays, the paint does
    assert page.shown is None and page.segmented is None and page.state.image is None
    assert sorted(page.paint.painted()) == sorted([*paths[:3], paths[5]])


def load_other(demo):
    """The demo again under another uid (a model switch: the app tells models apart by their uid)."""
    from dataclasses import replace

    return replace(demo, uid=demo.uid + 10_000)
