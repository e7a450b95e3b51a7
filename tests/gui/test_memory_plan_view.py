"""The Training form's memory plan (issue 34): planned in a worker once the settings settle, the same figures as
`finetune --plan`, planned again on a change of what it reads, and saying what would fit when the run will not."""

from __future__ import annotations

from tests.core.synthetic_data import make_dataset
from tests.gui.test_training_panel import _setup
from vitstudio.gui.training.training_panel import TrainingPanel


def test_the_form_plans_memory_and_says_what_would_fit(panel, qtbot, tmp_path, monkeypatch):
    from vitstudio.core.train import run_plan

    panel = _setup(panel(TrainingPanel), qtbot, make_dataset(tmp_path / "data", per_class=6), epochs=2)
    view = panel.memory_plan
    qtbot.waitUntil(lambda: getattr(view, "planned", None) is not None, timeout=20000)
    first = view.planned.plan
    assert first == run_plan.plan_for_dataset(panel._run_config()).plan  # the CLI's plan of the same settings
    assert first.batch_size == 8 and "fits" in view.summary.text() and "activations" in view.table.text()
    assert "total (peak)" in view.table.toolTip()
    panel.form.inputs["epochs"].setValue(3)  # not something the plan reads: nothing is planned again
    qtbot.wait(900)
    assert view.planned.plan is first
    monkeypatch.setattr(run_plan, "device_free", lambda device: first.total)  # a device just big enough for batch 8
    panel.form.inputs["batch_size"].setValue(32)
    qtbot.waitUntil(lambda: view.planned.plan.batch_size == 32, timeout=20000)
    assert view.planned.plan.activations > 3 * first.activations
    assert "will not fit" in view.summary.text() and "Would fit: " in view.summary.text()
    assert "batch size 8 with gradient accumulation 4" in view.summary.text()
