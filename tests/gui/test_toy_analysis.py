"""A toy analysis registered in the test (tests/core/test_registry.py: one compute function, one view, one
registration) appears in the Embeddings panel's method list, shows its map there and exports it with its parameter
file, and is offered side by side in Compare: no GUI code changes for a new analysis."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import TINY_SPEC
from tests.core.test_registry import TOY, toy_compute, toy_expected, toy_view
from vitstudio.core.analysis import registry
from vitstudio.core.data.images import read_image
from vitstudio.gui import actions, workers


@pytest.fixture(autouse=True)
def toy():
    """Registered before the window (and its panels) exist."""
    registry.register(registry.Analysis(
        TOY, "Toy channel mean", "embeddings", "mean of each patch token's channels (a test's toy)", "(gh, gw)",
        "overlay", (registry.Param("layer", "layer", -1, "0-based block"),), compare=True,
        compute=toy_compute, view=toy_view))
    yield
    registry.unregister(TOY)


def _settle(qtbot):
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)
    qtbot.wait(200)  # debounced controls


def test_a_toy_analysis_appears_in_the_embeddings_panel_compare_and_export(window, qtbot, tiny_weights, photos,
                                                                           tmp_path):
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(TINY_SPEC, "cpu", "fp32", str(tiny_weights[0]))
    window.add_paths([str(photos["astronaut"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    loaded = window.state.model
    x = loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]

    panel = window.embeddings
    window.show_tab("embeddings")
    assert panel.mode.findData(TOY) >= 0 and panel.mode.findText("Toy channel mean") >= 0
    assert window.attention.method.findData(TOY) < 0  # an embeddings analysis: not in the Attention panel
    panel.mode.setCurrentIndex(panel.mode.findData(TOY))
    panel.layer.setValue(0)
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.result is not None, timeout=30000)
    np.testing.assert_allclose(panel.displayed, toy_expected(loaded, x, 0), rtol=1e-5)
    assert actions.export_data(window, str(tmp_path / "toy.npy"))
    np.testing.assert_allclose(np.load(tmp_path / "toy.npy"), panel.displayed)
    params = json.loads((tmp_path / "toy.npy.json").read_text())["params"]
    assert params["method"] == TOY and params["title"] == "Toy channel mean" and params["layer"] == 0

    compare = window.compare
    assert compare.view_kind.findData(TOY) >= 0
    window.show_tab("compare")
    from vitstudio.core.models.loading import load_model

    other = load_model(TINY_SPEC)  # random weights
    compare.set_other(other)
    compare.view_kind.setCurrentIndex(compare.view_kind.findData(TOY))
    qtbot.waitUntil(lambda: compare.results is not None and compare.view_state.method == TOY, timeout=30000)
    mine, theirs = (r[1] for r in compare.results)
    np.testing.assert_allclose(mine, toy_expected(loaded, x, -1), rtol=1e-5)
    np.testing.assert_allclose(theirs, toy_expected(other, x, -1), rtol=1e-5)


# -- an attention-kind toy: read from the shared per-(model, image) overview, no job of its own ----------------
ATT_TOY = "toy-max-head"


def max_head_view(value, params, model):
    overview = value[1]
    return overview.head_maps[params["layer"]].max(0), f"Strongest head, layer {params['layer']}"


def max_head_compute(loaded, x, params):
    from vitstudio.core.analysis import attention

    return attention.head_maps(loaded, x, params["layer"])[0].max(0), {}


@pytest.fixture
def attention_toy():
    registry.register(registry.Analysis(
        ATT_TOY, "Toy strongest head", "attention", "per patch, the largest head map value (a test's toy)",
        "(gh, gw)", "overlay", (registry.Param("layer", "layer", -1, "0-based block"),),
        compute=max_head_compute, applies=("vitstudio.core.analysis.applicability:global_attention",),
        view=max_head_view, view_job="vitstudio.core.analysis.attention_views:overview_job",
        view_keys=("fusion", "discard")))
    yield
    registry.unregister(ATT_TOY)


def test_an_attention_toy_is_drawn_from_the_shared_overview(attention_toy, window, qtbot, tiny_weights, photos,
                                                            tmp_path):
    from vitstudio.core.analysis import attention

    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(TINY_SPEC, "cpu", "fp32", str(tiny_weights[0]))
    window.add_paths([str(photos["astronaut"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    loaded = window.state.model
    x = loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]
    panel = window.attention
    window.show_tab("attention")
    qtbot.waitUntil(lambda: panel.overview is not None, timeout=30000)
    overview = panel.overview
    assert panel.method.findData(ATT_TOY) >= 0 and window.embeddings.mode.findData(ATT_TOY) < 0
    panel.method.setCurrentIndex(panel.method.findData(ATT_TOY))
    panel.layer.setValue(0)
    assert panel.overview is overview and not workers.running_jobs()  # read from the overview: no new work
    expected = attention.head_maps(loaded, x, 0)[0].max(0)
    np.testing.assert_allclose(panel.view.values, expected, atol=1e-6)
    assert panel.info.text() == "Strongest head, layer 0"
    assert actions.export_data(window, str(tmp_path / "att-toy.npy"))
    params = json.loads((tmp_path / "att-toy.npy.json").read_text())["params"]
    assert params["method"] == ATT_TOY and params["layer"] == 0
