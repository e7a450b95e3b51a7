"""The Folder tab's Layers page (issue 33, item 2): the probes per block of the opened folder, the same figures as
`vitstudio layers`, dropped on a model or folder switch, cancelled without harm."""

from __future__ import annotations

import json

import numpy as np

from tests.gui.helpers import folder_panel
from tests.gui.helpers import settle as _settle
from vitstudio.core.models.demo import bundled_demo, render_digits


def test_the_layers_page_plots_the_probes_the_cli_prints_and_follows_switches(panel, qtbot, tmp_path, capsys):
    """"Probe every block" on 60 digits with the demo model: one accuracy per block, the drawn curve is the result, the
    lens curve is drawn, `vitstudio layers --json` prints the same accuracies; another folder drops the shown probes; a
    cancel says so and leaves the page usable, the cancelled run shows nothing; a model switch drops the old model's
    probes. [panel]
    """
    from vitstudio.cli import main
    from vitstudio.core.models.loading import load_model

    data = render_digits(tmp_path / "digits", per_class=6)
    folder = folder_panel(panel, qtbot, data)
    tab = folder.side.page("layers")
    assert tab.run_button.isEnabled() and tab.result is None
    tab.run_button.click()
    qtbot.waitUntil(lambda: tab.result is not None, timeout=60000)
    result = tab.result
    assert len(result.accuracy) == folder.state.model.depth and result.images == 60
    curve = [item for item in tab.plot.listDataItems() if item.name() and "probe" in item.name()][0]
    np.testing.assert_allclose(curve.getData()[1], result.accuracy)  # what is drawn is the result
    assert any("lens" in (item.name() or "") for item in tab.plot.listDataItems())
    assert "after the last block" in tab.note.text() and tab.run_button.isEnabled()
    assert main(["layers", str(data), "--model", str(bundled_demo()), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [b["probe_accuracy"] for b in doc["blocks"]] == [round(float(a), 6) for a in result.accuracy]

    # another folder: what was shown goes (it was the other folder's); a cancel leaves the page usable
    other = render_digits(tmp_path / "other", per_class=3)
    folder.open_folder(str(other))
    _settle(qtbot)
    assert tab.result is None and not tab.plot.listDataItems()
    tab.run_button.click()
    tab.cancel_button.click()
    assert "Cancelled" in tab.note.text() and tab.run_button.isEnabled() and not tab.cancel_button.isEnabled()
    _settle(qtbot)
    assert tab.result is None  # the cancelled run shows nothing, even if it finished in the meantime

    # a model switch drops the probes of the old model
    tab.run_button.click()
    qtbot.waitUntil(lambda: tab.result is not None, timeout=60000)
    folder.state.set_model(load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=10"))
    assert tab.result is None and not tab.plot.listDataItems()


def test_without_a_folder_of_class_folders_the_page_says_what_it_needs(panel, qtbot, tmp_path):
    """A dropped file (no class folders): the button is off and the page says it needs a folder of class folders.
    [panel]
    """
    from PIL import Image

    loose = tmp_path / "loose"
    loose.mkdir()
    for i in range(3):
        Image.new("RGB", (32, 32), (i * 60, 0, 0)).save(loose / f"{i}.png")
    tab = folder_panel(panel, qtbot, loose / "0.png").side.page("layers")  # a dropped file, not a folder
    assert not tab.run_button.isEnabled() and "folder of class folders" in tab.note.text()
