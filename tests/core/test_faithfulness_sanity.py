"""The cascading model-randomisation check (Adebayo et al. 2018) and the `vitstudio faithfulness` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.conftest import TINY_SPEC, make_tiny_vit
from tests.core.reference_vit import sharpen, wrap
from vitstudio.cli import main
from vitstudio.core.analysis import faithfulness as fa
from vitstudio.core.analysis import faithfulness_sanity as sanity


def _ranks(v):
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v))
    return r


def _run(gen):
    progress = []
    try:
        while True:
            progress.append(next(gen))
    except StopIteration as stop:
        return stop.value, progress


def test_cascade_redraws_the_head_then_blocks_from_the_top_and_leaves_the_model_alone():
    """Cascade steps re-draw head, then block 2, 1, 0 cumulatively on copies with new uids; the original weights are
    unchanged.
    """
    loaded = wrap(make_tiny_vit(depth=3), (32, 32))
    before = {k: v.clone() for k, v in loaded.model.state_dict().items()}
    seen = []
    for step, model in sanity.cascade(loaded, seed=1):
        state = model.model.state_dict()
        changed = {k.split(".")[0] + ("." + k.split(".")[1] if k.startswith("blocks") else "")
                   for k in state if not torch.equal(state[k], before[k])}
        seen.append((step, sorted(changed)))
        assert model.uid != loaded.uid and model.model is not loaded.model
    blocks = ["blocks.0", "blocks.1", "blocks.2"]
    assert seen == [("head", ["head"]), ("block 2", [*blocks[2:], "head"]), ("block 1", [*blocks[1:], "head"]),
                    ("block 0", [*blocks, "head"])]
    assert all(torch.equal(v, before[k]) for k, v in loaded.model.state_dict().items())


def test_correlations_are_spearman_of_the_maps_and_rollout_ignores_the_head():
    """Steps and progress; heads reported as error; rollout correlation 1 after the head step; gradient-rollout
    correlation equals a Spearman (Pearson of ranks) computed in the test.
    """
    loaded = wrap(sharpen(make_tiny_vit(seed=2)), (32, 32))
    xs = [torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    result, progress = _run(sanity.sanity_check(loaded, xs, ["rollout", "gradient-rollout", "heads"]))
    assert result.steps == ("head", "block 1", "block 0") and [p.done for p in progress] == [1, 2, 3]
    assert "patch grid" in result.errors["heads"]  # several maps per image: reported, the others go on
    # rollout never reads the head: unchanged after the head is re-drawn
    np.testing.assert_allclose(result.correlation["rollout"][:, 0], 1.0, atol=1e-9)
    # an independent Spearman (Pearson of ranks) on the maps of the fully randomised model
    *_, (_, last) = sanity.cascade(loaded, seed=0)
    for i, x in enumerate(xs):
        target = int(loaded.model(x).argmax())
        a = explain_map(loaded, x, "gradient-rollout", target)
        b = explain_map(last, x, "gradient-rollout", target)
        expected = np.corrcoef(_ranks(a), _ranks(b))[0, 1]
        assert result.correlation["gradient-rollout"][i, -1] == pytest.approx(expected, abs=1e-9)
    assert result.mean_curve("rollout")[0] == pytest.approx(1.0)


def explain_map(loaded, x, method, target):
    return fa.method_map(loaded, x, method, target).ravel()


def test_a_method_whose_maps_do_not_change_is_marked_insensitive():
    """`insensitive` names methods whose correlation stays high; `mean_curve` ignores NaN."""
    check = sanity.SanityCheck(("head", "block 0"), {"steady": np.array([[0.9, 0.8], [1.0, 0.7]]),
                                                    "fragile": np.array([[0.5, 0.1], [0.4, np.nan]])}, {})
    assert check.insensitive == ("steady",)
    np.testing.assert_allclose(check.mean_curve("fragile"), [0.45, 0.1])


def test_cli_prints_the_table_and_json(tiny_weights, photos, tmp_path, capsys):
    """`faithfulness --json --sanity` lists images, curves (AUC = area), summary incl. random, sanity steps, blur σ =
    patch; text table; unknown method exit 2; heads "not measured".
    """
    args = [str(photos["chelsea"]), str(photos["coffee"]), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
            "--methods", "rollout,occlusion", "--steps", "4"]
    assert main(["faithfulness", *args, "--json", "--sanity"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [i["image"] for i in doc["images"]] == [str(photos["chelsea"]), str(photos["coffee"])]
    first = doc["images"][0]["methods"]["rollout"]
    assert len(first["deletion"]) == 5 and first["deletion_auc"] == pytest.approx(fa.area(first["deletion"]), abs=1e-6)
    assert doc["summary"]["rollout"]["images"] == 2 and "random" in doc["summary"]
    assert doc["sanity"]["steps"] == ["head", "block 1", "block 0"]
    assert doc["protocol"]["blur_sigma_px"] == 8.0  # one 8-pixel patch
    assert main(["faithfulness", *args]) == 0
    text = capsys.readouterr().out
    assert "rollout" in text and "occlusion" in text and "random" in text
    assert main(["faithfulness", *args[:-4], "--methods", "nope"]) == 2
    capsys.readouterr()
    assert main(["faithfulness", *args[:-4], "--methods", "rollout,heads"]) == 0  # heads: several maps, reported
    assert "heads: not measured" in capsys.readouterr().out


def test_cli_refuses_a_method_that_does_not_apply(photos, capsys, monkeypatch):
    """A headless model: explicit occlusion is exit 2 naming "headless"; by default only applicable methods are measured
    and the others named on stderr.
    """
    # a headless model explains no class: refused with the reason before any image is read
    from vitstudio.cli import faithfulness as command

    headless = wrap(make_tiny_vit(num_classes=0), (32, 32), num_classes=3)
    monkeypatch.setattr(command, "load_model_from_args", lambda args: headless)
    code = main(["faithfulness", str(photos["chelsea"]), "--model", TINY_SPEC, "--methods", "rollout,occlusion"])
    assert code == 2 and "headless" in capsys.readouterr().err
    # by default the methods that apply are measured, the others named with their reason
    assert main(["faithfulness", str(photos["chelsea"]), "--model", TINY_SPEC, "--json", "--steps", "2"]) == 0
    out = capsys.readouterr()
    assert set(json.loads(out.out)["summary"]) == {"rollout", "random"}
    assert "skipped occlusion" in out.err and "headless" in out.err
