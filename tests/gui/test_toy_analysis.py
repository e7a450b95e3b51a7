"""A toy analysis registered in the test (tests/core/test_registry.py: one compute function, one view, one
registration) appears in the Embeddings panel's method list, shows its map there and exports it with its parameter
file, and is offered side by side in Compare: no GUI code changes for a new analysis."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.conftest import TINY_SPEC
from tests.core.test_registry import TOY, toy_compute, toy_expected, toy_view
from tests.gui.helpers import settle as _settle
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




def _astronaut_in_window(window, qtbot, tiny_weights, photos):
    """The tiny model loaded through the window and the astronaut selected: (loaded, its input batch)."""
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(TINY_SPEC, "cpu", "fp32", str(tiny_weights[0]))
    window.add_paths([str(photos["astronaut"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    loaded = window.state.model
    return loaded, loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]


def test_a_toy_analysis_appears_in_the_embeddings_panel_compare_and_export(window, qtbot, tiny_weights, photos,
                                                                           tmp_path):
    """The embeddings toy is listed in Embeddings (not Attention), its map equals its definition, exports with params,
    and Compare shows both models' toy maps. [window]
    """
    loaded, x = _astronaut_in_window(window, qtbot, tiny_weights, photos)

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
    """An attention toy with view_job=overview is drawn from the existing overview (no new job), equals max over heads
    of core head maps, info text and export params. [window]
    """
    from vitstudio.core.analysis import attention

    loaded, x = _astronaut_in_window(window, qtbot, tiny_weights, photos)
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


# -- a compute-only toy with a float and a choice parameter of its own (issue 30, item 4) --------------------------
PARAM_TOY = "toy-patch-energy"


def patch_energy(loaded, x, params):
    """Per patch, the mean or max of its patch-embedding channels' magnitudes, raised to `gain`."""
    with torch.no_grad():
        tokens = loaded.model.patch_embed(x)  # (1, gh, gw, C) or (1, N, C)
    magnitude = tokens.abs().reshape(*loaded.grid_size, -1)
    reduced = magnitude.mean(-1) if params["reduce"] == "mean" else magnitude.amax(-1)
    return reduced.pow(params["gain"]).numpy(), {}


@pytest.fixture
def param_toy():
    from vitstudio.core.fields import Range

    registry.register(registry.Analysis(
        PARAM_TOY, "Toy patch energy", "attention", "patch-embedding magnitude per patch (a test's toy)", "(gh, gw)",
        "overlay", (registry.Param("gain", "float", 1.0, "exponent of the map", range=Range(0.5, 4.0)),
                    registry.Param("reduce", "choice", "mean", "how a patch's channels are combined",
                                   ("mean", "max"))), compare=True, compute=patch_energy))
    yield
    registry.unregister(PARAM_TOY)


def test_a_compute_only_toy_gets_its_controls_in_the_attention_panel_compare_and_the_cli(param_toy, panel, qtbot,
                                                                                         tiny_weights, photos,
                                                                                         tmp_path):
    """Registered with only a compute function and two new parameters: the Attention panel offers it with a
    control per parameter (from their specs), changing a control re-runs it with the new value, Compare offers it
    and `explain` takes --gain and --reduce.

    An attention entry with only a compute function and a new float (range 0.5–4) and choice parameter: the Attention
    panel lists it with a spin box and a combo made from the specs (shown only for it), each change re-runs it and the
    map equals the toy's own computation for the new values; Compare lists it; `explain --gain 2 --reduce max` writes
    the same array (issue 30, item 4). [panel]
    """
    from PySide6.QtWidgets import QComboBox, QDoubleSpinBox

    from vitstudio.cli import main
    from vitstudio.core.models.loading import load_model
    from vitstudio.gui.explore.attention_panel import AttentionPanel
    from vitstudio.gui.explore.compare_panel import ComparePanel

    # the two panels it is offered in, built after the registration as the window builds them (no window needed)
    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    x = loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]
    compare = panel(ComparePanel)
    panel = panel(AttentionPanel, loaded, [photos["astronaut"]])
    assert panel.method.findData(PARAM_TOY) >= 0 and compare.view_kind.findData(PARAM_TOY) >= 0
    gain, reduce = panel.params.controls["gain"], panel.params.controls["reduce"]
    assert isinstance(gain, QDoubleSpinBox) and (gain.minimum(), gain.maximum(), gain.value()) == (0.5, 4.0, 1.0)
    assert isinstance(reduce, QComboBox) and [reduce.itemText(i) for i in range(reduce.count())] == ["mean", "max"]
    panel.method.setCurrentIndex(panel.method.findData(PARAM_TOY))
    assert panel.form.isRowVisible(panel.params.rows["gain"]) and not panel.form.isRowVisible(panel.params.rows["head"])

    def shown(gain_value, how):
        expected = patch_energy(loaded, x, dict(gain=gain_value, reduce=how))[0]
        qtbot.waitUntil(lambda: panel.displayed is not None and panel.displayed.shape == expected.shape
                        and np.allclose(panel.displayed, expected, rtol=1e-5), timeout=30000)
        return expected

    first = shown(1.0, "mean")
    gain.setValue(2.0)  # the control re-runs the analysis with its new value
    assert panel.view_state.gain == 2.0
    second = shown(2.0, "mean")
    reduce.setCurrentText("max")
    shown(2.0, "max")
    assert not np.allclose(first, second) and "gain 2.0" in panel.info.text()

    out = tmp_path / "cli.npy"
    assert main(["explain", str(photos["astronaut"]), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
                 "--method", PARAM_TOY, "--gain", "2", "--reduce", "max", "--out", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), panel.displayed, rtol=1e-5)


EMB_PARAM_TOY = "toy-token-power"


def token_power_view(tokens, params, grid, basis=None):
    """Per patch, the mean magnitude of its token's channels raised to `power`."""
    from vitstudio.core.analysis import embeddings

    return embeddings.TokenView(embeddings.upsample_to(np.abs(tokens.patches[0]).mean(-1) ** params["power"], grid))


def test_an_embeddings_toy_with_a_float_parameter_gets_its_control(panel, qtbot, tiny_weights, photos):
    """The Embeddings panel's form is the registry's too: a new float parameter gets a spin box from its spec, and
    changing it shows the entry's view for the new value.

    An embeddings entry with a new float parameter (range 0.5–3) gets a spin box from its spec in the Embeddings panel;
    changing it shows the entry's view for the new value (equal to the toy's own computation). [panel]
    """
    from PySide6.QtWidgets import QDoubleSpinBox

    from vitstudio.core.analysis import embeddings
    from vitstudio.core.fields import Range

    registry.register(registry.Analysis(
        EMB_PARAM_TOY, "Toy token power", "embeddings", "token magnitude to a power (a test's toy)", "(gh, gw)",
        "overlay", (registry.Param("layer", "layer", -1, "0-based block"),
                    registry.Param("power", "float", 1.0, "exponent", range=Range(0.5, 3.0))),
        compute=lambda loaded, x, params: embeddings._explain_view(token_power_view, loaded, x, params),
        view=token_power_view))
    try:
        from vitstudio.core.models.loading import load_model
        from vitstudio.gui.explore.embeddings_panel import EmbeddingsPanel

        # built after the registration, as the app's panels are
        panel = panel(EmbeddingsPanel, load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32"),
                      [photos["astronaut"]])
        power = panel.params.controls["power"]
        assert isinstance(power, QDoubleSpinBox) and (power.minimum(), power.maximum()) == (0.5, 3.0)
        panel.mode.setCurrentIndex(panel.mode.findData(EMB_PARAM_TOY))
        loaded = panel.state.model
        x = loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]
        tokens = embeddings.layer_tokens(loaded, x)

        def shown(value):
            expected = token_power_view(tokens[panel.view_state.layer], dict(power=value), loaded.grid_size).map
            qtbot.waitUntil(lambda: panel.displayed is not None and np.allclose(panel.displayed, expected, rtol=1e-5),
                            timeout=30000)

        shown(1.0)
        power.setValue(2.0)
        assert panel.view_state.power == 2.0
        shown(2.0)
    finally:
        registry.unregister(EMB_PARAM_TOY)
