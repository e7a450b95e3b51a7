"""Compare → Match's model without Qt (issue 52): a click on A gives the cosine of its patch to every patch of B
(computed here from the core's features) and the best match `vitstudio match --json` gives for the same point, both
points named in the line in their images' own pixels; another model leaves nothing of the first."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from vitstudio.app.app_state import ImageEntry
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.match_view import MatchModel
from vitstudio.cli import main
from vitstudio.core.data.images import read_image
from vitstudio.core.dense import matching
from vitstudio.core.models.loading import load_model

SPEC = "custom:img=64,patch=8,width=32,depth=2,heads=2,classes=2"  # an 8×8 grid


def _image(path, seed: int) -> str:
    rng = np.random.default_rng(seed)
    pixels = np.kron(rng.integers(0, 256, (12, 16, 3)), np.ones((4, 4, 1))).astype(np.uint8)  # 48×64, 4-px blocks
    Image.fromarray(pixels).save(path)
    return str(path)


def test_a_click_maps_the_patchs_cosine_over_b_and_matches_as_the_cli(tmp_path, capsys):
    """The block's range is the model's depth (its last block chosen); a point clicked on A's crop (key facet, block 0):
    its map over B equals the cosine of the core's features computed in the test (1e-5), the best patch is its argmax,
    the top 3 mutual matches are the core's; `vitstudio match --json` for the same point gives the same patch, best
    match (0.005 px) and similarity (1e-6), which the line says; Sub-patch on: the core's refined match (`--refine`'s,
    between patch centres) over the same map; another model (depth 4) keeps the point, takes its last block, and the map
    is of the new model's features (nothing of the first).
    """
    a_path, b_path = _image(tmp_path / "a.png", 0), _image(tmp_path / "b.png", 1)
    torch.manual_seed(0)
    loaded = load_model(SPEC, None, "cpu", "fp32")
    view = MatchModel(ScriptRunner())
    view.active = True
    view.set_model(loaded)
    assert view.state.block == 1 and view.state.fields()["block"].range.hi == 1  # the last block, the depth's range
    view.set_a(ImageEntry(a_path, read_image(a_path)))
    view.set_b(b_path)
    view.state.update(block=0, facet="key", top=3)
    assert view.features is not None and view.match is None and "Click a point" in view.line()
    view.click_crop(5.5 * 8, 3.5 * 8)  # the centre of the crop's patch (3, 5)
    match = view.match
    assert match is not None and match.patch == (3, 5)

    a, b = matching.facet_features(loaded, [read_image(a_path), read_image(b_path)], 0, "key")
    fa, fb = a.features[3, 5], b.features.reshape(-1, b.features.shape[-1])
    expected = (fb @ fa / (np.linalg.norm(fb, axis=1) * np.linalg.norm(fa))).reshape(8, 8)
    np.testing.assert_allclose(match.similarity, expected, atol=1e-5)
    assert match.best_patch == np.unravel_index(expected.argmax(), expected.shape)
    assert len(view.mutual()) == 3 and view.mutual() == matching.mutual_matches(a, b, 3)

    (x, y) = view.state.point
    torch.manual_seed(0)  # the same random weights as `loaded`
    code = main(["match", a_path, b_path, "--model", SPEC, "--points", f"{x!r},{y!r}", "--layer", "0", "--facet",
                 "key", "--json", "--device", "cpu"])
    out = capsys.readouterr()
    assert code == 0, out.err
    (row,) = json.loads(out.out)["points"]
    assert row["patch_a"] == [3, 5] and row["match"] == pytest.approx(match.best, abs=0.005)
    assert row["similarity"] == pytest.approx(match.value, abs=1e-6) and f"{match.value:.3f}" in view.line()
    (bx, by) = row["match"]  # the line names both points in their images' own pixels (64×48), as the CLI does
    assert (f"A at x {x:.0f}, y {y:.0f} (of 64×48 px) → best match in B at x {bx:.0f}, y {by:.0f} (of 64×48 px)"
            in view.line()), view.line()
    assert view.titles() == (f"A: a.png — point at x {x:.0f}, y {y:.0f}",  # above the views too: always in sight
                             f"B: b.png — best match at x {bx:.0f}, y {by:.0f}, similarity {match.value:.3f}")
    view.state.update(refine=True)  # sub-patch: the core's refined match (what --refine prints), the map unchanged
    (refined,) = matching.match_points(a, b, [(x, y)], refine=True)
    assert refined["match"] != row["match"]  # a pixel between patch centres
    assert view.match.best == pytest.approx(refined["match"], abs=0.005) and view.match.similarity is not None
    assert view.match.value == pytest.approx(refined["similarity"], abs=1e-6)
    np.testing.assert_allclose(view.match.similarity, expected, atol=1e-5)

    deeper = load_model("custom:img=64,patch=8,width=32,depth=4,heads=2,classes=2", None, "cpu", "fp32")
    view.set_model(deeper)
    assert view.state.block == 3 and view.state.point == (x, y)  # the point is A's, the block the new model's last
    a2, b2 = matching.facet_features(deeper, [read_image(a_path), read_image(b_path)], 3, "key")
    np.testing.assert_allclose(view.match.similarity, matching.similarity_map(a2, b2, (3, 5)), atol=1e-6)
    assert not np.allclose(view.match.similarity, expected, atol=1e-3)  # nothing of the first model is left
