"""The quick preset from the Training panel (issue 22 item 1): it is the first preset, a run finishes in seconds,
draws one curve point per full-batch step and shows its results like any run."""

from __future__ import annotations

import json

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset, tree_state
from vitstudio.gui.training.training_panel import TrainingPanel


def test_quick_is_the_first_preset_and_trains_from_the_panel(panel, qtbot, tmp_path):
    """Quick is the first preset; a run from the panel finishes, shows a 3-row results table, uses the features data
    path, one curve point per step; dataset untouched. [panel] [fine-tune]
    """
    data = make_dataset(tmp_path / "data", per_class=16)
    before = tree_state(data)
    panel = panel(TrainingPanel)
    assert panel.form.preset.itemText(0) == "quick"
    panel.set_dataset(str(data))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    panel.dataset.base_model.setEditText(TINY_SPEC.replace("classes=5", "classes=3"))
    panel.form.preset.setCurrentText("quick")
    panel.start()
    qtbot.waitUntil(lambda: panel.job is not None and panel.job.done, timeout=60000)
    assert "finished" in panel.controls.status.text()
    qtbot.waitUntil(lambda: panel.results.report is not None, timeout=20000)
    assert panel.results.table.rowCount() == 3
    run = panel.shown_run
    steps = json.loads((run / "status.json").read_text())["epochs_done"]
    assert json.loads((run / "train_config.json").read_text())["data_path"] == "features"
    assert steps >= 2 and len(panel.shown.epochs["epoch"]) == steps  # a curve point per full-batch step
    assert tree_state(data) == before
