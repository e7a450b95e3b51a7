"""The analysis panels show exactly what the core computes, follow the controls, and export what they show."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import TINY_SPEC
from tests.gui.helpers import settle as _settle
from vitstudio.core.analysis import attention, embeddings
from vitstudio.core.analysis.intrinsic import pos_embed_similarity
from vitstudio.core.data.images import read_image
from vitstudio.gui import actions


@pytest.fixture
def ready(window, qtbot, tiny_weights, photos):
    """Window with the tiny model loaded and the astronaut selected; returns (window, loaded, x)."""
    weights, _ = tiny_weights
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(TINY_SPEC, "cpu", "fp32", str(weights))
    window.add_paths([str(photos["astronaut"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    loaded = window.state.model
    x = loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]
    return window, loaded, x


@pytest.fixture
def astronaut(tiny_weights, photos):
    """(the tiny model loaded as the model bar loads it, the astronaut, its input batch) for a test of one panel."""
    from vitstudio.core.models.loading import load_model

    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    return loaded, photos["astronaut"], loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]


def test_attention_panel_follows_controls(panel, astronaut, qtbot):
    """Head maps per layer/head, head grid, rollout (fusion/discard), gradient rollout (target), token maps from a
    clicked patch (both directions), distance plot all equal core attention functions. [panel] The head grid has a title
    above its maps naming the layer and what they show ("Layer 0: each head's CLS attention"; the walk: a grid without a
    caption).
    """
    from vitstudio.gui.explore.attention_panel import AttentionPanel

    loaded, image, x = astronaut
    panel = panel(AttentionPanel, loaded, [image])
    qtbot.waitUntil(lambda: panel.overview is not None, timeout=30000)
    shown = lambda: panel.view.values  # noqa: E731  (the map the view draws)
    np.testing.assert_allclose(shown(), attention.head_maps(loaded, x, 1)[0, 0], atol=1e-6)
    panel.layer.setValue(0)
    panel.head.setValue(1)
    np.testing.assert_allclose(shown(), attention.head_maps(loaded, x, 0)[0, 1], atol=1e-6)
    assert len(panel.grid.items) == 2  # one small map per head
    np.testing.assert_allclose(panel.grid.items[1].image, attention.head_maps(loaded, x, 0)[0, 1], atol=1e-6)
    grid = panel.grid  # its title says what the small maps are, above them (the walk: a grid without a caption)
    assert grid.title.text == "Layer 0: each head's CLS attention" and grid.title.isVisible()
    assert grid.title.sceneBoundingRect().bottom() <= min(v.sceneBoundingRect().top() for v in grid.views)

    panel.method.setCurrentText("Rollout")
    np.testing.assert_allclose(shown(), attention.rollout(loaded, x)[0], atol=1e-6)
    panel.fusion.setCurrentText("max")
    panel.discard.setValue(0.5)
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.overview.fusion == "max" and panel.overview.discard == 0.5, timeout=10000)
    np.testing.assert_allclose(shown(), attention.rollout(loaded, x, "max", 0.5)[0], atol=1e-6)

    panel.method.setCurrentText("Gradient rollout")
    gradient = lambda: panel.jobs.current(panel.slots["gradient-rollout"])  # noqa: E731 (the view job's result)
    qtbot.waitUntil(lambda: gradient() is not None, timeout=30000)
    np.testing.assert_allclose(shown(), attention.gradient_rollout(loaded, x).maps[0], atol=1e-6)
    panel.target.setCurrentIndex(panel.target.findData(3))
    _settle(qtbot)
    qtbot.waitUntil(lambda: gradient() is not None and gradient().targets[0] == 3, timeout=10000)
    np.testing.assert_allclose(shown(), attention.gradient_rollout(loaded, x, 3).maps[0], atol=1e-6)
    assert "class 3" in panel.info.text()

    # a click on the picture at patch (2, 1) shows that patch's token map
    crop_h, crop_w = loaded.input_hw
    assert panel.view.patch_at(1.5 * crop_w / 4, 2.5 * crop_h / 4) == (2, 1)
    panel.view.patch_clicked.emit(2, 1)
    qtbot.waitUntil(lambda: panel.tokens is not None and panel.view_state.patch == (2, 1), timeout=30000)
    maps = attention.token_maps(loaded, x, (2, 1))
    assert panel.method.currentText() == "Token map"
    np.testing.assert_allclose(shown(), maps.attends_to[0, 0, 1], atol=1e-6)
    panel.direction.setCurrentIndex(1)
    np.testing.assert_allclose(shown(), maps.attended_by[0, 0, 1], atol=1e-6)
    assert panel.view.marker.isVisible()
    np.testing.assert_allclose(panel.distance.values, attention.attention_stats(loaded, x).distance, rtol=1e-5)


def test_embeddings_panel(panel, astronaut, qtbot):
    """PCA RGB per layer, similarity from a clicked patch, token norms, fixed basis reused across layers equal core
    embeddings functions. [panel]
    """
    from vitstudio.gui.explore.embeddings_panel import EmbeddingsPanel

    loaded, image, x = astronaut
    panel = panel(EmbeddingsPanel, loaded, [image])
    qtbot.waitUntil(lambda: panel.result is not None, timeout=30000)
    tokens = embeddings.layer_tokens(loaded, x)
    np.testing.assert_allclose(panel.displayed, embeddings.pca_rgb(tokens[1].patches)[0][0], atol=1e-4)
    panel.layer.setValue(0)
    _settle(qtbot)
    np.testing.assert_allclose(panel.displayed, embeddings.pca_rgb(tokens[0].patches)[0][0], atol=1e-4)
    panel.view.patch_clicked.emit(3, 0)
    _settle(qtbot)
    assert panel.mode.currentText() == "Similarity to patch"
    np.testing.assert_allclose(panel.displayed, embeddings.cosine_similarity_to(tokens[0].patches, (3, 0))[0],
                               atol=1e-5)
    panel.mode.setCurrentText("Token norms")
    _settle(qtbot)
    np.testing.assert_allclose(panel.displayed, embeddings.token_norms(tokens[0])[0][0], rtol=1e-5)
    # a fixed basis fitted on layer 0 is reused on layer 1
    panel.mode.setCurrentText("PCA → RGB")
    panel.fixed.setChecked(True)
    _settle(qtbot)
    basis = panel.basis
    assert basis is not None
    panel.layer.setValue(1)
    _settle(qtbot)
    np.testing.assert_allclose(panel.displayed, basis.project(tokens[1].patches)[0], atol=1e-4)


def test_internals_compare_and_export(ready, qtbot, tmp_path, tiny_weights):
    """Internals pos-embed equals `pos_embed_similarity`; Compare maps equal core rollout of both models with shared
    levels; export data writes the shown array and params; export view PNG > 300 px. [window]
    """
    window, loaded, x = ready
    window.show_tab("internals")
    qtbot.waitUntil(lambda: "pos-embed" in window.internals.results, timeout=30000)
    np.testing.assert_allclose(window.internals.results["pos-embed"][0].array, pos_embed_similarity(loaded.model))

    window.show_tab("compare")
    from vitstudio.core.models.loading import load_model

    other = load_model(TINY_SPEC)  # random weights: a different model on the same image
    window.compare.set_other(other)
    qtbot.waitUntil(lambda: window.compare.results is not None, timeout=30000)
    mine, theirs = (r[1] for r in window.compare.results)
    np.testing.assert_allclose(mine, attention.rollout(loaded, x)[0], atol=1e-6)
    np.testing.assert_allclose(theirs, attention.rollout(other, x)[0], atol=1e-6)
    lo, hi = window.compare.shared_levels()
    assert lo == pytest.approx(min(mine.min(), theirs.min())) and hi == pytest.approx(max(mine.max(), theirs.max()))
    assert tuple(window.compare.views[0].overlay.levels) == tuple(window.compare.views[1].overlay.levels)

    window.show_tab("attention")
    qtbot.waitUntil(lambda: window.attention.overview is not None, timeout=30000)
    assert actions.export_data(window, str(tmp_path / "att.npy"))
    saved = np.load(tmp_path / "att.npy")
    np.testing.assert_allclose(saved, window.attention.displayed)
    params = json.loads((tmp_path / "att.npy.json").read_text())["params"]
    assert params["method"] == "heads" and params["title"] == "Head map" and params["layer"] == 1
    assert actions.export_view(window, str(tmp_path / "view.png"))
    from PIL import Image

    assert Image.open(tmp_path / "view.png").size[0] > 300


def test_recent_files_persist(window, qtbot, photos):
    """An opened file is stored in settings "recent" and the Recent menu, once the open has finished (its images
    arrive before it does). [window]"""
    window.add_paths([str(photos["rocket"])])
    qtbot.waitUntil(lambda: len(window.state.images) == 1 and bool(window.settings.value("recent")), timeout=10000)
    assert len(window.state.images) == 1 and window.settings.value("recent")[0] == str(photos["rocket"])
    assert [a.text() for a in window.recent_menu.actions()] == [str(photos["rocket"])]


def test_export_from_every_tab(ready, qtbot, tmp_path):
    """File -> Export data works on every tab and writes the registry's parameter record (same as the CLI's).

    File → Export data works on every tab with the registry's method and model recorded; the Training tab without a run
    says "Nothing to export". [window]
    """
    window, loaded, x = ready
    from vitstudio.core.models.loading import load_model

    window.compare.set_other(load_model(TINY_SPEC))
    expected = {"predictions": None, "attention": "heads", "embeddings": "pca", "internals": "pos-embed",
                "compare": "rollout", "training": None}
    for tab, method in expected.items():
        window.show_tab(tab)
        _settle(qtbot)
        if tab == "training":  # nothing to export until a run is shown: a message, not an exception
            assert not actions.export_data(window, str(tmp_path / "training.npy"))
            assert "Nothing to export" in window.log_view.toPlainText()
            continue
        qtbot.waitUntil(lambda: window.tabs.currentWidget().export_data() is not None, timeout=30000)
        path = tmp_path / f"{tab}.npy"
        assert actions.export_data(window, str(path)), tab
        record = json.loads((tmp_path / f"{tab}.npy.json").read_text())["params"]
        assert np.load(path).size > 0
        if method is not None:
            assert record["method"] == method and record["model"] == loaded.name, (tab, record)
            assert record["image"] in (window.state.selected.path, None)


def test_gui_and_cli_write_the_same_parameter_record(ready, qtbot, tmp_path, photos, tiny_weights):
    """One vocabulary: the app's export of a rollout view and `vitstudio explain --method rollout` on the same
    model and image write the same array and the same parameter record.

    [window]
    """
    from vitstudio.cli import main

    window, loaded, x = ready
    panel = window.attention
    window.show_tab("attention")
    panel.method.setCurrentIndex(panel.method.findData("rollout"))
    panel.fusion.setCurrentText("max")
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.overview is not None and panel.overview.fusion == "max", timeout=30000)
    assert actions.export_data(window, str(tmp_path / "gui.npy"))
    assert main(["explain", str(photos["astronaut"]), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
                 "--method", "rollout", "--fusion", "max", "--out", str(tmp_path / "cli.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "gui.npy"), np.load(tmp_path / "cli.npy"), atol=1e-6)
    gui = json.loads((tmp_path / "gui.npy.json").read_text())
    cli = json.loads((tmp_path / "cli.npy.json").read_text())
    gui["params"].pop("description")  # the on-screen caption, an extra of the app
    assert gui == cli


def test_slider_work_waits_for_the_control_to_stop(qtbot, monkeypatch):
    """Ten moves of a control within the debounce interval start its work once, after the interval (the suite runs
    with a 0-ms debounce, tests/gui/conftest.py; this is the app's 120 ms)."""
    import time

    from vitstudio.app.app import App
    from vitstudio.app.jobs import ScriptRunner
    from vitstudio.gui.explore.embeddings_panel import EmbeddingsPanel
    from vitstudio.gui.explore.explorer_base import ExplorerPanel

    monkeypatch.setattr(ExplorerPanel, "DEBOUNCE_MS", 120)
    panel = EmbeddingsPanel(App(ScriptRunner()))
    qtbot.addWidget(panel)
    calls, start = [], time.monotonic()
    for _ in range(10):
        panel.later(lambda: calls.append(time.monotonic()))
    assert panel.debouncing() and calls == []
    qtbot.waitUntil(lambda: bool(calls), timeout=5000)
    qtbot.wait(150)
    assert len(calls) == 1 and calls[0] - start >= 0.11
