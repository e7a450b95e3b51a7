"""Switching between models of different depth, with every tab hidden and shown: no exception, and what each
tab shows is the core's result for the new model (results are keyed by the request that made them)."""

from __future__ import annotations

import numpy as np

from tests.conftest import TINY_SPEC
from tests.gui.helpers import load_in_window
from tests.gui.helpers import settle as _settle
from vitstudio.core.analysis import attention, embeddings
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model
from vitstudio.gui.explore.attention_panel import AttentionPanel
from vitstudio.gui.explore.embeddings_panel import EmbeddingsPanel
from vitstudio.gui.explore.internals_panel import InternalsPanel

DEEP_SPEC = "custom:img=32,patch=8,width=32,depth=4,heads=4,classes=5"


def _x(loaded, path):
    return loaded.to_tensor(loaded.crop(read_image(path)))[None]


def test_models_of_different_depth_with_tabs_hidden_and_shown(window, qtbot, tiny_weights, photos):
    """Switching 2-layer ↔ 4-layer models with hidden tabs resets slider ranges and stale results; attention head maps,
    head grid and embeddings PCA equal core for the new model; internals keyed to the current uid. [window]
    """
    shallow = load_in_window(window, qtbot, TINY_SPEC, str(tiny_weights[0]))
    window.add_paths([str(photos["chelsea"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    for tab in ("attention", "embeddings"):
        window.show_tab(tab)
        _settle(qtbot)
    att, emb = window.attention, window.embeddings
    assert att.overview is not None and att.overview.head_maps.shape[0] == shallow.depth == 2

    window.show_tab("predictions")  # every explorer hidden
    deep = load_in_window(window, qtbot, DEEP_SPEC)
    assert (att.layer.maximum(), att.view_state.layer, att.head.maximum()) == (3, 3, 3)
    assert att.overview is None  # the 2-layer result is not this model's
    for layer in (0, 3, 2):  # moving the sliders of hidden tabs must not index the old arrays
        att.layer.setValue(layer)
        emb.layer.setValue(layer)
        att.head.setValue(3)
    _settle(qtbot)
    x = _x(deep, photos["chelsea"])

    window.show_tab("attention")
    _settle(qtbot)
    qtbot.waitUntil(lambda: att.overview is not None, timeout=30000)
    np.testing.assert_allclose(att.view.values, attention.head_maps(deep, x, 2)[0, 3], atol=1e-6)
    assert len(att.grid.items) == 4

    window.show_tab("embeddings")
    _settle(qtbot)
    qtbot.waitUntil(lambda: emb.result is not None, timeout=30000)
    tokens = embeddings.layer_tokens(deep, x)
    np.testing.assert_allclose(emb.displayed, embeddings.pca_rgb(tokens[2].patches)[0][0], atol=1e-4)

    # back to the shallow model while the attention tab is on screen at layer 3
    window.show_tab("attention")
    att.layer.setValue(3)
    shallow2 = load_in_window(window, qtbot, TINY_SPEC, str(tiny_weights[0]))
    _settle(qtbot)
    qtbot.waitUntil(lambda: att.overview is not None, timeout=30000)
    assert att.view_state.layer == 1 and att.head.maximum() == 1
    x = _x(shallow2, photos["chelsea"])
    np.testing.assert_allclose(att.view.values, attention.head_maps(shallow2, x, 1)[0, min(3, 1)], atol=1e-6)

    window.show_tab("internals")
    _settle(qtbot)
    qtbot.waitUntil(lambda: "pos-embed" in window.internals.results, timeout=30000)
    assert window.internals.results["model"] == shallow2.uid


def test_smooth_overlay_is_the_bilinear_upsampling_of_the_map(panel, qtbot, tiny_weights, photos):
    """The smooth overlay equals core `upsample` to the input size; unchecked it is the raw patch map. [panel]"""
    from vitstudio.core.analysis.overlays import upsample

    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    att = panel(AttentionPanel, loaded, [photos["rocket"]])
    _settle(qtbot)
    qtbot.waitUntil(lambda: att.overview is not None, timeout=30000)
    values = att.view.values
    assert att.smooth.isChecked() and att.view.overlay.image.shape == loaded.input_hw
    np.testing.assert_allclose(att.view.overlay.image, upsample(values, loaded.input_hw), atol=1e-6)
    att.smooth.setChecked(False)  # the blocky patch view is one click away
    np.testing.assert_array_equal(att.view.overlay.image, values)


def test_only_the_controls_of_the_chosen_method_show(panel):
    """Rollout shows fusion/discard, gradient rollout target, token map direction/layer/head, and not the others; job
    slots are named by the entry (heads and rollout share the overview's). [panel]
    """
    att = panel(AttentionPanel)
    # job slots are named by the entry (issue 30, item 5): its own name, or the overview the head maps and rollout
    # are both drawn from (one forward)
    assert att.slots["heads"] == att.slots["rollout"] == "overview"
    assert all(slot == m for m, slot in att.slots.items() if m not in ("heads", "rollout"))
    visible = lambda name: att.form.isRowVisible(att.params.rows[name])  # noqa: E731
    att.method.setCurrentIndex(att.method.findData("rollout"))
    assert visible("fusion") and visible("discard") and not visible("head") and not visible("target")
    att.method.setCurrentIndex(att.method.findData("gradient-rollout"))
    assert visible("target") and not visible("fusion") and not visible("layer")
    att.method.setCurrentIndex(att.method.findData("token"))
    assert visible("direction") and visible("layer") and visible("head") and not visible("discard")


def test_a_dinov3_style_model_in_every_tab(panel, qtbot, tmp_path, photos):
    """RoPE + 4 registers + class token (timm's Eva): attention and embeddings show the core's arrays; the model
    internals say clearly that there is no learned position embedding.

    [panel]
    """
    import timm
    from timm.models import save_for_hf

    torch = __import__("torch")
    torch.manual_seed(0)
    model = timm.create_model("vit_small_patch16_dinov3", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_classes=5)
    save_for_hf(model, str(tmp_path / "dinov3"), safe_serialization=True)
    loaded = load_model(str(tmp_path / "dinov3"), device="cpu", precision="fp32")
    assert loaded.num_prefix_tokens == 5
    x = _x(loaded, photos["astronaut"])
    att = panel(AttentionPanel, loaded, [photos["astronaut"]])
    _settle(qtbot)
    qtbot.waitUntil(lambda: att.overview is not None, timeout=30000)
    np.testing.assert_allclose(att.view.values, attention.head_maps(loaded, x, 1)[0, 0], atol=1e-6)
    emb = panel(EmbeddingsPanel, loaded, [photos["astronaut"]])
    _settle(qtbot)
    qtbot.waitUntil(lambda: emb.result is not None, timeout=30000)
    tokens = embeddings.layer_tokens(loaded, x)
    np.testing.assert_allclose(emb.displayed, embeddings.pca_rgb(tokens[1].patches)[0][0], atol=1e-4)
    internals = panel(InternalsPanel, loaded, [photos["astronaut"]])
    _settle(qtbot)
    qtbot.waitUntil(lambda: "pos-embed" in internals.results, timeout=30000)
    assert "no learned position embedding" in internals.label("pos-embed").text()


def test_methods_that_do_not_apply_are_greyed_with_the_reason(panel, tmp_path):
    """Parallel attention branches (ParallelThingsBlock): gradient rollout is greyed out with the reason, and a
    view left on it falls back to head maps; a plain ViT afterwards enables it again.

    [panel]
    """
    import timm
    from timm.models import save_for_hf

    model = timm.create_model("vit_small_patch16_18x2_224", pretrained=False, img_size=32, patch_size=8,
                              embed_dim=32, depth=2, num_heads=2, num_classes=5)
    save_for_hf(model, str(tmp_path / "parallel"), safe_serialization=True)
    att = panel(AttentionPanel)
    att.method.setCurrentIndex(att.method.findData("gradient-rollout"))
    att.state.set_model(load_model(str(tmp_path / "parallel"), device="cpu", precision="fp32"))
    index = att.method.findData("gradient-rollout")
    assert not att.method.model().item(index).isEnabled()
    assert "combine several" in att.method.itemData(index, __import__("PySide6.QtCore").QtCore.Qt.ToolTipRole)
    assert att.view_state.method == "heads" and att.method.currentData() == "heads"
    att.state.set_model(load_model(TINY_SPEC))
    assert att.method.model().item(index).isEnabled()


def _save(tmp_path, name, arch, **kwargs):
    import timm
    import torch
    from timm.models import save_for_hf

    torch.manual_seed(0)
    save_for_hf(timm.create_model(arch, pretrained=False, **kwargs), str(tmp_path / name), safe_serialization=True)
    return str(tmp_path / name)


def test_a_swin_model_shows_window_token_maps_and_greys_global_views(window, qtbot, tmp_path, photos):
    """Swin: the attention tab falls back to token maps (the global methods greyed with the reason), clicking a
    patch shows the core's in-window map and the head grid holds only that stage's heads; the distance plot and
    its folder button say why there is none; embeddings show every stage on the patch grid.

    [window]
    """
    from PySide6.QtCore import Qt

    folder = _save(tmp_path, "swin", "swin_tiny_patch4_window7_224", img_size=40, window_size=4, embed_dim=16,
                   depths=(2, 2), num_heads=(1, 2), num_classes=5)
    load_in_window(window, qtbot, "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3")  # at layer 1 too
    loaded = load_in_window(window, qtbot, folder)
    window.add_paths([str(photos["coffee"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    att = window.attention
    window.show_tab("attention")
    _settle(qtbot)
    assert att.view_state.method == "token"
    for method in ("heads", "rollout", "gradient-rollout"):
        index = att.method.findData(method)
        assert not att.method.model().item(index).isEnabled()
        assert "inside local windows" in att.method.itemData(index, Qt.ToolTipRole)
    assert not att.folder_button.isEnabled() and "windows" in att.distance.full_title
    assert "Click a patch" in att.info.text()
    att.select_patch(3, 7)
    _settle(qtbot)
    qtbot.waitUntil(lambda: att.tokens is not None, timeout=30000)
    x = _x(loaded, photos["coffee"])
    expected = attention.token_maps(loaded, x, (3, 7))
    att.layer.setValue(1)
    att.head.setValue(0)
    np.testing.assert_allclose(att.view.values, expected.attends_to[0, 1, 0], atol=1e-6, equal_nan=True)
    assert "inside its window" in att.info.text() and len(att.grid.items) == 1  # stage 1: one head
    att.layer.setValue(3)
    att.head.setValue(1)
    np.testing.assert_allclose(att.view.values, expected.attends_to[0, 3, 1], atol=1e-6, equal_nan=True)
    assert len(att.grid.items) == 2
    att.layer.setValue(0)
    assert att.view.values is None and "has 1 head" in att.info.text()

    window.show_tab("embeddings")
    _settle(qtbot)
    qtbot.waitUntil(lambda: window.embeddings.result is not None, timeout=30000)
    emb = window.embeddings
    assert emb.layer.maximum() == 1 and emb.layer_label.text() == "stage 1"  # two stages (after a ViT's layer 1)
    tokens = embeddings.layer_tokens(loaded, x)
    np.testing.assert_allclose(emb.displayed, embeddings.upsample_to(embeddings.pca_rgb(tokens[1].patches)[0][0],
                                                                     (10, 10)), atol=1e-4)
    window.show_tab("internals")
    _settle(qtbot)
    qtbot.waitUntil(lambda: "pos-embed" in window.internals.results, timeout=30000)
    assert "no learned position embedding" in window.internals.label("pos-embed").text()
    window.compare.set_other(load_model(TINY_SPEC))  # rollout of a ViT beside a Swin: the reason, no error
    window.show_tab("compare")
    _settle(qtbot)
    assert "does not apply" in window.compare.titles[0].text() and window.compare.results is None


def test_a_cait_model_in_the_attention_tab(panel, qtbot, tmp_path, photos):
    """CaiT: four attention layers (two talking-heads, two class-attention) in the explorer, named by what their
    head maps show; the distance plot leaves out the class-attention layers (no patch queries).

    [panel]
    """
    folder = _save(tmp_path, "cait", "cait_xxs24_224", img_size=32, patch_size=8, embed_dim=32, depth=2,
                   num_heads=2, depth_token_only=2, num_classes=5)
    loaded = load_model(folder, device="cpu", precision="fp32")
    att = panel(AttentionPanel, loaded, [photos["astronaut"]])
    att.method.setCurrentIndex(att.method.findData("heads"))
    _settle(qtbot)
    qtbot.waitUntil(lambda: att.overview is not None, timeout=30000)
    assert att.layer.maximum() == 3
    x = _x(loaded, photos["astronaut"])
    for layer, words in ((3, "Class attention"), (0, "Mean attention received")):
        att.layer.setValue(layer)
        np.testing.assert_allclose(att.view.values, attention.head_maps(loaded, x, layer)[0, 0], atol=1e-6)
        assert words in att.info.text()
    assert len(att.distance.scatter.data) == 2 * 2  # two self-attention layers × two heads
    att.method.setCurrentIndex(att.method.findData("rollout"))
    np.testing.assert_allclose(att.view.values, attention.rollout(loaded, x)[0], atol=1e-6)
    emb = panel(EmbeddingsPanel, loaded, [photos["astronaut"]])
    _settle(qtbot)
    qtbot.waitUntil(lambda: emb.result is not None, timeout=30000)
    assert emb.layer.maximum() == 1
