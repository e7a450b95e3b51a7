"""Paint to segment, the app's model (issue 52): brush, eraser, undo and redo on the image's own pixels; painting three
images, segmenting the folder, correcting one image and segmenting again — the same masks as `vitstudio segment` from
the same painted files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.core.generators import drain
from tests.core.planted_shapes import planted_folder
from vitstudio.app.paint_masks import UNDO_DEPTH, UNPAINTED, PaintMasks, PaintState
from vitstudio.cli import main

SPEC = "custom:img=64,patch=8,width=32,depth=2,heads=2,classes=2"


def test_brush_eraser_undo_and_redo_change_exactly_the_stroke():
    """A stroke paints exactly the pixels within the radius of its polyline (distance written in the test), a later
    stroke wins under the brush, the eraser un-paints, undo and redo restore exactly, each change announced once; a
    stroke off the image does nothing; undo keeps 100 steps; a mask painted at another size is refused in one sentence.
    """
    paint = PaintMasks(PaintState(brush_class=1, radius=3))
    heard = []
    paint.changed.connect(heard.append)
    assert paint.stroke("a.png", (20, 30), [(5, 5), (15, 5)])
    yy, xx = np.mgrid[:20, :30]
    # within 3 px of the segment (5, 5)-(15, 5): written here from the distance to a horizontal segment
    near = np.hypot(xx - np.clip(xx, 5, 15), yy - 5) <= 3
    assert ((paint.mask("a.png") == 1) == near).all() and (paint.mask("a.png")[~near] == UNPAINTED).all()
    first = paint.mask("a.png").copy()
    paint.state.update(brush_class=0, radius=2)
    paint.stroke("a.png", (20, 30), [(10, 5)])  # latest wins under the brush
    disc = np.hypot(xx - 10, yy - 5) <= 2
    assert (paint.mask("a.png")[disc] == 0).all() and (paint.mask("a.png")[~disc] == first[~disc]).all()
    paint.state.update(erase=True)
    paint.stroke("a.png", (20, 30), [(14, 5)])
    assert (paint.mask("a.png")[np.hypot(xx - 14, yy - 5) <= 2] == UNPAINTED).all()
    assert paint.undo() == "a.png" and paint.undo() == "a.png" and (paint.mask("a.png") == first).all()
    assert paint.redo() == "a.png" and (paint.mask("a.png")[disc] == 0).all()
    assert heard == ["a.png"] * 6 and not paint.stroke("a.png", (20, 30), [(100, 100)])  # off the image: nothing
    for i in range(UNDO_DEPTH + 5):
        paint.stroke("a.png", (20, 30), [(i % 30, 1)])
    assert len(paint.undo_steps) == UNDO_DEPTH and paint.redo_steps == []
    with pytest.raises(ValueError, match="painted at 30×20"):
        paint.stroke("a.png", (21, 30), [(1, 1)])


def _paint_truth(paint: PaintMasks, path: str, truth: np.ndarray) -> None:
    """Strokes a person might make: the shape's centre line with the object class, the top edge as background."""
    ys, xs = np.nonzero(truth)
    paint.state.update(brush_class=1, radius=max(2, int(min(np.ptp(ys), np.ptp(xs)) // 4)), erase=False)
    paint.stroke(path, truth.shape, [(xs.min() + 3, ys.mean()), (xs.max() - 3, ys.mean())])
    paint.state.update(brush_class=0, radius=3)
    paint.stroke(path, truth.shape, [(0, 1), (truth.shape[1] - 1, 1)])


def test_paint_three_segment_correct_one_and_the_cli_agrees(tmp_path, capsys):
    """Three images painted and saved, the folder segmented; a fourth painted (a correction), saved and segmented
    again: every painted image keeps its paint in its mask, and `vitstudio segment` on the same painted folder writes
    the same masks both times; the saved folder reads back as the masks painted.

    Three images painted by strokes and saved, the folder segmented; a fourth painted (a correction), saved and
    segmented again: every painted image keeps its paint in its mask, `vitstudio segment` on the same painted folder
    writes the same masks both times, and the folder reads back as the masks painted.
    """
    from vitstudio.core.dense.segment import segment_folder
    from vitstudio.core.models.loading import load_model

    truth = planted_folder(tmp_path / "images", 7, seed=11)
    paths = sorted(truth)
    torch.manual_seed(0)
    loaded = load_model(SPEC, None, "cpu", "fp32")
    paint = PaintMasks()
    for p in paths[:3]:
        _paint_truth(paint, p, truth[p])
    assert sorted(paint.painted()) == paths[:3] and len(paint.save(tmp_path / "painted")) == 3
    for round_ in ("first", "corrected"):
        ours = drain(segment_folder(loaded, str(tmp_path / "images"), str(tmp_path / "painted"),
                                    tmp_path / f"app-{round_}"))
        torch.manual_seed(0)
        code = main(["segment", str(tmp_path / "images"), "--model", SPEC, "--masks", str(tmp_path / "painted"),
                     "--out", str(tmp_path / f"cli-{round_}"), "--quiet", "--device", "cpu"])
        assert code == 0, capsys.readouterr().err
        for image in ours.images:
            app_mask = np.asarray(Image.open(image.mask))
            assert (app_mask == np.asarray(Image.open(tmp_path / f"cli-{round_}" / Path(image.mask).name))).all()
            own = paint.mask(image.file)
            if own is not None:
                assert (app_mask[own != UNPAINTED] == own[own != UNPAINTED]).all()
        if round_ == "first":
            _paint_truth(paint, paths[5], truth[paths[5]])
            assert len(paint.save(tmp_path / "painted")) == 4
    reloaded = PaintMasks()
    reloaded.load(tmp_path / "painted", paths)
    assert sorted(reloaded.masks) == sorted(paint.painted())
    assert all((reloaded.mask(p) == paint.mask(p)).all() for p in paint.painted())
