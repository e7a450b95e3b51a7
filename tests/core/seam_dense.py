"""The seam matrix's `dense` column (tests/core/test_seam_matrix.py; issue 52), every base row: `vitstudio segment`
on two photos, one painted — a mask per photo at its own size (classes 0, 1, or 255 outside the crop), its JSON
shares those of the PNG, the painted pixels kept as painted — and a point of a photo matched in the same photo in
every facet the family gives (token; key and query where its attention exposes them): within a patch of itself,
similarity 1. Families whose blocks carry no single token grid (Swin) refuse in one line with the concepts' reason.
That the CLI's masks and matches are the core's, and the core's retrieval is hummingbird's: tests/core/test_dense.py.
The match is asked of the core, not the CLI: one model load a cell (the matrix's budget)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from vitstudio.core.concepts.tokens import concept_layers_refusal
from vitstudio.core.dense.matching import FACETS, facet_features, facet_refusal, match_points


def _folder(photos, tmp_path):
    """Two photos; chelsea painted: its left third background (0), a box in its middle object (1), the rest not."""
    folder, painted = tmp_path / "photos", tmp_path / "painted"
    folder.mkdir()
    painted.mkdir()
    for name in ("chelsea.png", "coffee.jpg"):
        shutil.copy(photos / name, folder / name)
    h, w = Image.open(folder / "chelsea.png").size[::-1]
    mask = np.full((h, w), 255, np.uint8)
    mask[:, : w // 3] = 0
    mask[h // 3: 2 * h // 3, w // 2: 3 * w // 4] = 1
    Image.fromarray(mask).save(painted / "chelsea.png")
    return folder, painted, mask


def dense_cell(source, photo, tmp_path, cli, assert_works_or_refuses, loaded):
    folder, painted, mask = _folder(photo.parent, tmp_path)
    code, out, err = cli(["segment", folder, *source.model_args, "--masks", painted, "--out", tmp_path / "out",
                          "--json", "--quiet", "--device", "cpu", "--precision", "fp32"])
    refusal = concept_layers_refusal(loaded.model)
    if not assert_works_or_refuses(code, out, err, may_refuse=refusal is not None):
        assert refusal[:40] in err
        return
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted(Path(r["file"]).name for r in records) == ["chelsea.png", "coffee.jpg"]
    for record in records:
        written = np.asarray(Image.open(record["mask"]))
        assert written.shape == Image.open(record["file"]).size[::-1] and set(np.unique(written)) <= {0, 1, 255}
        shares = np.bincount(written.ravel(), minlength=256)[:2] / written.size
        np.testing.assert_allclose(list(record["shares"].values()), shares, atol=1e-6)
    chelsea = np.asarray(Image.open(tmp_path / "out" / "chelsea.png"))
    assert (chelsea[mask != 255] == mask[mask != 255]).all()  # painted pixels stand
    image = Image.open(folder / "chelsea.png").convert("RGB")
    top, left, h, w = loaded.crop_box(chelsea.shape)
    x, y = left + w // 2, top + h // 2
    step = max(w / loaded.grid_size[1], h / loaded.grid_size[0])  # one patch, in the image's pixels
    for facet in FACETS:
        layer = loaded.token_depth - 1
        if facet_refusal(loaded, layer, facet):
            assert facet != "token"
            continue
        a, b = facet_features(loaded, [image, image], layer, facet)
        (row,) = match_points(a, b, [(x, y)])
        assert abs(row["similarity"] - 1) < 1e-4 and max(abs(row["match"][0] - x), abs(row["match"][1] - y)) <= step
