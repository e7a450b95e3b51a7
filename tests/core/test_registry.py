"""An analysis IS its registry entry: no code outside the registry branches on an analysis name, and a toy analysis
registered here (one compute function, one view, one registration) reaches explain(), the CLI's `--method` list
and help, and exported parameter files with no other change (the GUI side is tests/gui/test_toy_analysis.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY_SPEC
from vitstudio.core.analysis import embeddings, registry
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model

ROOT = Path(__file__).resolve().parents[2]
TOY = "toy-mean"


# -- the toy analysis: one compute function, one GUI view, one registration ----------------------------------
def toy_view(tokens, params, grid, basis=None) -> embeddings.TokenView:
    """Mean of every patch token's channels, on the patch grid."""
    return embeddings.TokenView(embeddings.upsample_to(tokens.patches[0].mean(-1), grid))


def toy_compute(loaded, x, params):
    tokens = embeddings.layer_tokens(loaded, x, [params["layer"]])[params["layer"]]
    return toy_view(tokens, params, loaded.grid_size).map, {}


def toy_expected(loaded, x, layer: int) -> np.ndarray:
    """Written from the definition: block `layer`'s patch tokens, channel mean."""
    tokens = embeddings.layer_tokens(loaded, x, [layer])[layer % loaded.token_depth]
    return tokens.patches[0].mean(-1)


@pytest.fixture
def toy():
    registry.register(registry.Analysis(
        TOY, "Toy channel mean", "embeddings", "mean of each patch token's channels (a test's toy)", "(gh, gw)",
        "overlay", (registry.Param("layer", "layer", -1, "0-based block"),), compare=True,
        compute=toy_compute, view=toy_view))
    yield registry.get(TOY)
    registry.unregister(TOY)


# -- no branching on names -----------------------------------------------------------------------------------
def _comparisons(names) -> re.Pattern:
    quoted = "|".join(re.escape(n) for n in names)
    q = rf"""["'](?:{quoted})["']"""
    return re.compile(rf"(?:==|!=)\s*{q}|{q}\s*(?:==|!=)|\bin\s*[(\[{{][^)\]}}]*{q}|\bcase\s+{q}")


def test_no_code_outside_the_registry_branches_on_an_analysis_name():
    """No line under vitstudio/ (except registry.py) compares against an analysis name."""
    pattern = _comparisons(registry.REGISTRY)
    # timm's pooling mode "token" is not the token-map analysis
    not_analyses = ("global_pool",)
    hits = []
    for path in sorted((ROOT / "vitstudio").rglob("*.py")):
        if path == ROOT / "vitstudio/core/analysis/registry.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not any(w in line for w in not_analyses):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "analysis names branched on outside the registry:\n" + "\n".join(hits)


def test_the_grep_would_catch_a_branch():
    """The pattern matches ==, !=, `in (...)` and `case` comparisons but not a plain call argument."""
    pattern = _comparisons(registry.REGISTRY)
    for line in ('if method == "rollout":', "x = 1 if 'pca' != mode else 2", 'if m in ("heads", "token"):',
                 '    case "filters":'):
        assert pattern.search(line), line
    assert not pattern.search('why_not(model, "rollout")')


def test_the_registry_imports_without_torch():
    """Importing the registry does not import torch. [subprocess]"""
    code = ("import sys; from vitstudio.core.analysis import registry; "
            "assert 'torch' not in sys.modules and registry.REGISTRY['rollout'].compute")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# -- a toy analysis reaches everything -------------------------------------------------------------------------
def test_a_toy_analysis_is_in_the_clis_method_list_and_help(toy, capsys):
    """The toy is in explain help's method description, `--method` choices and `--layer` "used by"."""
    from vitstudio.cli import main

    try:  # main() turns argparse's exit into a return code
        main(["explain", "--help"])
    except SystemExit:
        pass
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"{TOY} = Toy channel mean" in help_text  # the methods listed in the description
    assert re.search(rf"one of [^;]*{TOY}", help_text)  # --method's choices
    assert re.search(rf"--layer.*?used by (?:[\w-]+, )*{TOY}\b", help_text)  # the parameters it takes


def test_a_toy_analysis_runs_through_explain_the_cli_and_exports(toy, tiny_weights, photos, tmp_path):
    """Toy explain equals its definition computed in the test; params/figure; CLI npy equal; sidecar method/title/layer.
    """
    from vitstudio.cli import main
    from vitstudio.core.analysis.explain import explain, render_figure

    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    image = read_image(photos["chelsea"])
    x = loaded.to_tensor(loaded.crop(image))[None]
    exp = explain(loaded, TOY, image, layer=0)
    np.testing.assert_allclose(exp.array, toy_expected(loaded, x, 0), rtol=1e-6)
    assert exp.params == {"layer": 0} and render_figure(exp).ndim == 3
    out = tmp_path / "toy.npy"
    assert main(["explain", str(photos["chelsea"]), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
                 "--method", TOY, "--layer", "0", "--out", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), exp.array, rtol=1e-6)
    sidecar = json.loads((tmp_path / "toy.npy.json").read_text())
    assert sidecar["params"]["method"] == TOY and sidecar["params"]["title"] == "Toy channel mean"
    assert sidecar["params"]["layer"] == 0


def test_a_folder_analysis_runs_through_its_entry(tiny_weights, photos):
    """Every folder analysis runs via `explain_folder`; distance equals `distance_over`; a per-image method over a
    folder raises "one image at a time".
    """
    from vitstudio.core.analysis.explain import distance_over, explain_folder

    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    folder = str(Path(photos["chelsea"]).parent)
    for method in registry.names(folder=True):
        exp, errors = explain_folder(loaded, method, [folder])
        assert exp.method == method
    ref, ref_errors = distance_over(loaded, [folder])
    np.testing.assert_array_equal(explain_folder(loaded, "distance", [folder])[0].array, ref.array)
    with pytest.raises(ValueError, match="one image at a time"):
        explain_folder(loaded, "rollout", [folder])
