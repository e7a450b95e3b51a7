"""The Folder tab's Register neurons page's model (app/pages/register_neurons.py), without Qt: the search over the
folder open in the App, each neuron's map on the selected image, the register file; nothing kept across folders."""

from __future__ import annotations

import numpy as np
from timm.models import save_for_hf

from tests.core.planted_registers import LAYER, NEURON, RED, planted_vit, red_images
from vitstudio.app.app import App
from vitstudio.app.folder_page import FolderPageModel
from vitstudio.app.jobs import ScriptRunner
from vitstudio.core.analysis.registers import read_registers


def test_the_page_finds_the_planted_neuron_maps_it_on_the_selected_image_and_writes_the_file(tmp_path):
    """On the App (a script's runner): the page is listed under "register-neurons" with the protocol's members; Find
    ranks the planted neuron first on the folder opened, then reads every block's patch norms over the folder without
    and with the register (from the neuron's block on the maximum falls by half, the register carries it); selecting
    an image gives each neuron's map on it, the planted one's largest at the red patches; Save writes a register file
    `--registers` reads back; another folder leaves no result, no map and no norms."""
    model = planted_vit()
    model.pretrained_cfg = {**model.pretrained_cfg, "input_size": (3, 32, 32), "crop_pct": 1.0}
    save_for_hf(model, str(tmp_path / "planted"), safe_serialization=True)
    red_images(tmp_path / "red")
    app = App(ScriptRunner())
    app.load_model(str(tmp_path / "planted"))
    app.folder.open_paths([str(tmp_path / "red")])
    page = app.pages["register-neurons"]
    assert set(FolderPageModel.__annotations__) <= set(dir(page)) and page.ready() and page.result is None
    page.state.update(detect_layer=-2, top=5)
    page.start()
    first = page.result.neurons[0]
    assert (first.layer, first.neuron) == (LAYER, NEURON) and len(page.result.neurons) == 5
    plain, moved = page.artifacts  # the folder's patch norms per block, without and with the register
    for block in range(LAYER, 4):
        assert moved.max_patch[:, block].max() <= 0.5 * plain.max_patch[:, block].min()
        assert (moved.prefix_max[block, 1] > 0.5 * plain.max_patch[:, block].max())
    app.folder.select(0)
    crop, maps = page.maps
    assert crop.shape == (32, 32, 3) and maps.shape == (5, 4, 4)
    hot = {tuple(int(v) for v in np.unravel_index(i, (4, 4))) for i in np.argsort(maps[0].ravel())[-2:]}
    assert hot == set(RED) and maps[0].max() > 5
    saved = read_registers(page.save(str(tmp_path / "reg.json")))
    assert (saved.neurons[0].layer, saved.neurons[0].neuron) == (LAYER, NEURON)
    red_images(tmp_path / "grey", red=False)
    app.folder.open_paths([str(tmp_path / "grey")])
    assert page.result is None and page.maps is None and page.artifacts is None
