"""The attribution methods of issue 24 (integrated gradients, occlusion, CP-LRP) reach the Attention panel's list,
draw their map there (computed in a worker) and are offered side by side in Compare, through the registry alone."""

from __future__ import annotations

import numpy as np

from tests.conftest import TINY_SPEC
from vitstudio.core.analysis import registry
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model
from vitstudio.gui import workers
from vitstudio.gui.explore.attention_panel import AttentionPanel
from vitstudio.gui.explore.compare_panel import ComparePanel

NEW = ("integrated-gradients", "occlusion", "lrp")


def test_attribution_methods_are_drawn_in_the_attention_panel_and_compare(panel, qtbot, tiny_weights, photos):
    """IG, occlusion and LRP are listed, drawn equal to the registry's run "for class …"; Compare LRP maps of both
    models equal the registry's. [panel]
    """
    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    x = loaded.to_tensor(loaded.crop(read_image(photos["chelsea"])))[None]
    attention = panel(AttentionPanel, loaded, [photos["chelsea"]])
    for name in NEW:
        assert attention.method.findData(name) >= 0
        attention.method.setCurrentIndex(attention.method.findData(name))
        qtbot.waitUntil(lambda: attention.displayed is not None and not workers.running_jobs(), timeout=30000)
        expected = registry.get(name).run(loaded, x, {"target": None})[0]
        np.testing.assert_allclose(attention.view.values, expected, atol=1e-5)
        assert "for class" in attention.info.text()

    compare = panel(ComparePanel, loaded, [photos["chelsea"]])
    other = load_model(TINY_SPEC)  # random weights
    compare.set_other(other)
    compare.view_kind.setCurrentIndex(compare.view_kind.findData("lrp"))
    qtbot.waitUntil(lambda: compare.results is not None and compare.view_state.method == "lrp", timeout=30000)
    mine, theirs = (r[1] for r in compare.results)
    np.testing.assert_allclose(mine, registry.get("lrp").run(loaded, x, {"target": None})[0], atol=1e-5)
    np.testing.assert_allclose(theirs, registry.get("lrp").run(other, x, {"target": None})[0], atol=1e-5)


def test_the_attention_tab_measures_the_faithfulness_and_sanity_of_the_map_on_screen(panel, qtbot, tiny_weights,
                                                                                     photos):
    """Measure shows deletion curve/AUC equal core `image_faithfulness` with 4 curves on a probability axis without SI
    prefixes (it read "(x0." with ticks 200–600: item 12); Sanity shows correlations equal `sanity_job` and "barely
    changes" iff insensitive; switching method clears both. [panel]
    """
    from vitstudio.core.analysis import faithfulness as fa
    from vitstudio.core.analysis import faithfulness_sanity as sanity

    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    x = loaded.to_tensor(loaded.crop(read_image(photos["rocket"])))[None]
    panel = panel(AttentionPanel, loaded, [photos["rocket"]])
    panel.method.setCurrentIndex(panel.method.findData("rollout"))
    widget = panel.faithfulness
    assert widget.shown is None
    widget.measure_button.click()
    qtbot.waitUntil(lambda: widget.shown is not None, timeout=60000)
    expected = fa.image_faithfulness(loaded, x, ["rollout"])
    np.testing.assert_allclose(widget.shown.methods["rollout"].deletion, expected.methods["rollout"].deletion,
                               atol=1e-6)
    assert f"deletion {expected.methods['rollout'].deletion_auc:.3f}" in widget.summary.text()
    assert len(widget.curves.getPlotItem().listDataItems()) == 4  # the map's and random's, deletion and insertion
    left = widget.curves.getAxis("left")  # probabilities as they are: no "(x0.001)" with ticks 200-600 (item 12)
    assert left.autoSIPrefixScale == 1.0 and "(x" not in left.labelString(), left.labelString()

    widget.sanity_button.click()
    qtbot.waitUntil(lambda: widget.shown_sanity is not None, timeout=60000)
    check = sanity.sanity_job(None, loaded, read_image(photos["rocket"]), "rollout")
    np.testing.assert_allclose(widget.shown_sanity.correlation["rollout"], check.correlation["rollout"], atol=1e-9)
    assert ("barely changes" in widget.summary.text()) == ("rollout" in check.insensitive)

    # another method: the measurement of rollout is not shown for it
    panel.method.setCurrentIndex(panel.method.findData("lrp"))
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)
    assert widget.shown is None and widget.shown_sanity is None
    assert not widget.curves.getPlotItem().listDataItems()


def test_the_attention_tab_shows_the_map_as_a_mass_mask(panel, qtbot, tiny_weights, photos):
    """The mask slider shows `mass_mask(rollout, 0.6)` with "mask: the fewest patches holding 60% of the mass (they hold
    N%)" (the setting and the share kept, both: "keeping 16 %" under 15 % read as a mismatch in the walk); 0 restores
    the map. [panel]
    """
    from vitstudio.core.analysis import attention
    from vitstudio.core.analysis.masks import mass_mask

    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    x = loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None]
    panel = panel(AttentionPanel, loaded, [photos["astronaut"]])
    panel.method.setCurrentIndex(panel.method.findData("rollout"))
    qtbot.waitUntil(lambda: panel.displayed is not None and not workers.running_jobs(), timeout=30000)
    rollout = attention.rollout(loaded, x)[0]
    np.testing.assert_allclose(panel.displayed, rollout, rtol=1e-5)
    panel.mask.setValue(60)
    expected, kept = mass_mask(rollout, 0.6)
    np.testing.assert_array_equal(panel.displayed, expected.astype(np.float32))
    np.testing.assert_array_equal(panel.view.values, expected.astype(np.float32))
    assert f"mask: the fewest patches holding 60% of the mass (they hold {float(kept):.0%})" in panel.info.text()
    panel.mask.setValue(0)  # off: the map again
    np.testing.assert_allclose(panel.displayed, rollout, rtol=1e-5)


def test_faithfulness_is_offered_only_for_one_map_on_the_patch_grid(panel, tiny_weights, photos):
    """Issue 29, item 6: head maps (one per head) and the PCA (three channels) grey Measure faithfulness and Sanity
    check out with the reason, from the registry's declared output; rollout and the attribution maps offer both.

    [panel]
    """
    attention = panel(AttentionPanel, load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32"), [photos["chelsea"]])
    widget = attention.faithfulness
    for method in ("heads", "rollout", "lrp"):
        attention.method.setCurrentIndex(attention.method.findData(method))
        one_map = registry.get(method).one_map
        assert widget.measure_button.isEnabled() == one_map == widget.sanity_button.isEnabled(), method
        if not one_map:
            assert "Pick Rollout or an attribution method" in widget.measure_button.toolTip()
            assert "Pick Rollout or an attribution method" in widget.sanity_button.toolTip()
    assert not registry.get("heads").one_map and not registry.get("pca").one_map and registry.get("rollout").one_map


def test_a_click_under_a_class_method_says_it_shows_the_token_map(panel, qtbot, tiny_weights, photos):
    """Issue 29, item 12: a click on the image under rollout switched to the token map without a word; it says so,
    and a click under the token map itself says nothing.

    A click on the image under rollout switches to that patch's token map and says so in one message (it was silent); a
    click under the token map says nothing (issue 29, item 12). [panel]
    """
    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    attention = panel(AttentionPanel, loaded, [photos["rocket"]])
    attention.method.setCurrentIndex(attention.method.findData("rollout"))
    said = []
    attention.state.message.connect(lambda level, text: said.append(text))
    attention.view.patch_clicked.emit(1, 2)
    assert attention.view_state.method == "token" and attention.view_state.patch == (1, 2)
    assert said == ["A click picks a patch: its Token map is shown (the Method box goes back to Rollout)."], said
    attention.view.patch_clicked.emit(2, 2)
    assert len(said) == 1 and attention.view_state.patch == (2, 2)
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)


def test_the_mask_on_screen_exports_as_png_and_coco_rle(panel, qtbot, tiny_weights, photos, tmp_path):
    """Issue 29, item 12: the Attention tab's mask could be exported only as .npy (PNG and COCO RLE were CLI-only).
    Its button writes what `explain --mask` writes: the PNG at the photo's size (the crop's part where the model saw
    it) and the COCO JSON, equal to the core's mask of the same map.

    [panel]
    """
    import json

    from PIL import Image

    from tests.core.test_faithfulness_masks import mask_on_the_image, rle_decode
    from vitstudio.core.analysis import attention
    from vitstudio.core.analysis.masks import mass_mask

    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32")
    view = panel(AttentionPanel, loaded, [photos["astronaut"]])
    view.method.setCurrentIndex(view.method.findData("rollout"))
    qtbot.waitUntil(lambda: view.displayed is not None and not workers.running_jobs(), timeout=30000)
    assert not view.mask_button.isEnabled()  # no mask on screen: nothing to export
    view.mask.setValue(60)
    assert view.mask_button.isEnabled()
    png, coco = view.export_mask(str(tmp_path))
    assert png.name == "astronaut.jpg.rollout.mask.png" and coco.name == "rollout.masks.json"
    rollout = attention.rollout(loaded, loaded.to_tensor(loaded.crop(read_image(photos["astronaut"])))[None])[0]
    image = read_image(photos["astronaut"])
    expected = mask_on_the_image(mass_mask(rollout, 0.6)[0], image, loaded)  # the photo's size (the walk)
    np.testing.assert_array_equal(np.asarray(Image.open(png)) > 0, expected)
    doc = json.loads(coco.read_text())
    assert (doc["images"][0]["height"], doc["images"][0]["width"]) == (image.height, image.width)
    np.testing.assert_array_equal(rle_decode(doc["annotations"][0]["segmentation"]), expected)
