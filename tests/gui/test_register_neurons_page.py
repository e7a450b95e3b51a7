"""The Folder tab's Register neurons page (gui/folder/pages/register_neurons_page.py): what it lists and draws is its
model's result, on a tiny ViT with a planted register neuron (tests/core/planted_registers.py)."""

from __future__ import annotations

import numpy as np
from timm.models import save_for_hf

from tests.core.planted_registers import LAYER, NEURON, planted_vit, red_images
from tests.gui.helpers import settle


def test_the_page_lists_the_neurons_and_draws_the_picked_ones_map(panel, qtbot, tmp_path):
    """Find (detect block -2 set through its spin box) lists the planted neuron first, one row per neuron kept; the
    map drawn over the selected image is the picked neuron's (another row picked: its map); Save is offered; the norms
    per block drawn are the folder's, without and with the register, and the register's own. [panel]"""
    from vitstudio.core.models.loading import load_model
    from vitstudio.gui.folder.folder_panel import FolderPanel

    model = planted_vit()
    model.pretrained_cfg = {**model.pretrained_cfg, "input_size": (3, 32, 32), "crop_pct": 1.0}
    save_for_hf(model, str(tmp_path / "planted"), safe_serialization=True)
    folder = panel(FolderPanel, model=load_model(str(tmp_path / "planted"), device="cpu", precision="fp32"))
    folder.open_folder(str(red_images(tmp_path / "red")[0].parent))
    settle(qtbot)
    page = folder.side.page("register-neurons")
    page.detect_layer.setValue(-2)
    page.top.setValue(4)
    assert page.model.state.detect_layer == -2 and page.run_button.isEnabled() and not page.save_button.isEnabled()
    page.run_button.click()
    qtbot.waitUntil(lambda: page.model.result is not None, timeout=30000)
    assert page.table.rowCount() == 4 and (page.table.item(0, 0).text(), page.table.item(0, 1).text()) == (
        str(LAYER), str(NEURON))
    page.model.folder.select(0)
    qtbot.waitUntil(lambda: page.model.maps is not None, timeout=30000)
    settle(qtbot)
    np.testing.assert_array_equal(page.map.values, page.model.maps[1][0])
    page.table.selectRow(2)
    np.testing.assert_array_equal(page.map.values, page.model.maps[1][2])
    assert page.save_button.isEnabled() and "images have tokens above" in page.note.text()
    qtbot.waitUntil(lambda: page.model.artifacts is not None, timeout=30000)
    settle(qtbot)
    plain, moved = page.model.artifacts
    curves = {item.name(): item.getData()[1] for item in page.norms.listDataItems()}
    np.testing.assert_allclose(curves["patches"], plain.max_patch.mean(0))
    np.testing.assert_allclose(curves["patches, with the register"], moved.max_patch.mean(0))
    np.testing.assert_allclose(curves["the register (largest)"], moved.prefix_max[:, 1])


def test_the_attention_tabs_register_toggle_draws_the_maps_of_the_model_with_the_register(panel, qtbot, tmp_path):
    """"With a test-time register" is off until the Registers page found neurons; on, the head map and rollout drawn
    are the core's on the model with the register on those neurons (the class token's attention to the red patches
    in the block after the neuron's falls); off again, the plain model's. [panel]"""
    from vitstudio.core.analysis import attention
    from vitstudio.core.analysis.registers import test_time_register
    from vitstudio.core.data.images import read_image
    from vitstudio.core.models.loading import load_model
    from vitstudio.gui.explore.attention_panel import AttentionPanel

    model = planted_vit()
    model.pretrained_cfg = {**model.pretrained_cfg, "input_size": (3, 32, 32), "crop_pct": 1.0}
    save_for_hf(model, str(tmp_path / "planted"), safe_serialization=True)
    loaded = load_model(str(tmp_path / "planted"), device="cpu", precision="fp32")
    images = red_images(tmp_path / "red")
    view = panel(AttentionPanel, loaded, [images[0]])
    qtbot.waitUntil(lambda: view.overview is not None, timeout=30000)
    assert not view.with_register.isEnabled()
    view.app.folder.open_paths([str(images[0].parent)])
    settle(qtbot)
    page = view.app.pages["register-neurons"]
    page.state.update(detect_layer=-2)
    page.start()
    qtbot.waitUntil(lambda: page.result is not None, timeout=30000)
    x = loaded.to_tensor(loaded.crop(read_image(images[0])))[None]
    view.layer.setValue(LAYER + 1)
    view.head.setValue(0)
    settle(qtbot)
    plain = attention.head_maps(loaded, x, LAYER + 1)[0, 0]
    np.testing.assert_allclose(view.view.values, plain, atol=1e-6)
    assert view.with_register.isEnabled()
    view.with_register.setChecked(True)
    settle(qtbot)
    qtbot.waitUntil(lambda: view.overview is not None, timeout=30000)
    with test_time_register(loaded, page.result):
        moved = attention.head_maps(loaded, x, LAYER + 1)[0, 0]
        rolled = attention.rollout(loaded, x)[0]
    np.testing.assert_allclose(view.view.values, moved, atol=1e-6)
    assert f"with a test-time register on {len(page.result.neurons)} neurons" in view.info.text()
    red = [(0, 1), (2, 3)]
    assert sum(moved[r, c] for r, c in red) < 0.5 * sum(plain[r, c] for r, c in red)
    view.method.setCurrentText("Rollout")
    settle(qtbot)
    np.testing.assert_allclose(view.view.values, rolled, atol=1e-6)
    view.with_register.setChecked(False)
    settle(qtbot)
    qtbot.waitUntil(lambda: view.overview is not None, timeout=30000)
    np.testing.assert_allclose(view.view.values, attention.rollout(loaded, x)[0], atol=1e-6)
