"""The text map in the Attention tab (issue 23 item 3): for a CLIP-style model, typing a text draws where the
image tower finds it (the core's `explain --method text` map), a second text draws another map, and for a plain
ViT the method is greyed out with the reason."""

from __future__ import annotations

import numpy as np

from tests.conftest import TINY_SPEC
from vitstudio.app.app_state import make_entry
from vitstudio.core.analysis.explain import explain
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model
from vitstudio.gui.explore.attention_panel import AttentionPanel


def test_typed_text_draws_the_core_text_map(panel, qtbot, clip_dir, photos, tiny_weights):
    """Text method greyed for a plain ViT ("text tower"); for CLIP two typed texts draw maps equal core `explain
    --method text` and differ; faithfulness measures "similarity to …", sanity disabled with its reason. [panel]
    """
    panel = panel(AttentionPanel, load_model(TINY_SPEC, str(tiny_weights[0]), "cpu", "fp32"))
    item = panel.method.model().item(panel.method.findData("text"))
    assert not item.isEnabled() and "text tower" in panel.method.itemData(panel.method.findData("text"), 3)

    panel.state.set_model(load_model(str(clip_dir), device="cpu", precision="fp32"))
    panel.state.add_images([make_entry(str(photos["coffee"]), read_image(photos["coffee"]))])
    panel.method.setCurrentIndex(panel.method.findData("text"))
    assert panel.text.isVisible() and "Type a text" in panel.info.text()
    image = read_image(photos["coffee"])
    maps = {}
    for text in ("a bee", "a cup of coffee"):
        panel.text.setText(text)
        panel.text.editingFinished.emit()
        qtbot.waitUntil(lambda t=text: panel.displayed is not None and "“" + t in panel.info.text(), timeout=60000)
        expected = explain(panel.state.model, "text", image, text=text).array
        np.testing.assert_allclose(panel.displayed, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
        maps[text] = panel.displayed.copy()
    assert not np.allclose(maps["a bee"], maps["a cup of coffee"])
    # faithfulness of the text map: its curves follow the similarity to the text typed; the sanity check (which
    # re-draws the classifier) says why it does not apply
    faith = panel.faithfulness
    assert faith.measure_button.isEnabled() and not faith.sanity_button.isEnabled()
    assert "re-draws the classifier" in faith.sanity_button.toolTip()
    faith.measure()
    qtbot.waitUntil(lambda: faith.shown is not None, timeout=120000)
    assert faith.shown.score == "similarity to 'a cup of coffee'"
    assert faith.summary.text().startswith("Similarity to 'a cup of coffee': deletion")
