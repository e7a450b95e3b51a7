"""The Training form's memory plan (issue 34): planned in a worker once the settings settle, the same figures as
`finetune --plan`, planned again on a change of what it reads, and saying what would fit when the run will not."""

from __future__ import annotations

from tests.core.synthetic_data import make_dataset
from tests.gui.test_training_panel import _setup
from vitstudio.gui.training.training_panel import TrainingPanel


def test_the_form_plans_memory_and_says_what_would_fit(panel, qtbot, tmp_path, monkeypatch):
    """The Training form's plan (a worker job once the settings settle) equals `plan_for_dataset` of the run's config
    (the CLI's twin); a setting it does not read plans nothing again; with a device just big enough for batch 8, batch
    32 says "will not fit" and names batch 8 with gradient accumulation 4. [panel]
    """
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


def test_an_adapter_target_the_model_lacks_greys_start_and_the_fix_clears_it(panel, qtbot, tmp_path):
    """Issue 49 item 10: a LoRA target the blocks lack left Start enabled while the plan said it could not plan the
    run ("…(--lora-targets).)."); after the fix the old failure stayed in the status line.

    A LoRA target the blocks lack (typed "qkvv"): the plan says "cannot plan this run. … (--lora-targets)." once (it
    read ".).") and Start is greyed with that reason in its tooltip and the status line, over an earlier "Training
    failed"; the fixed targets plan again, enable Start and the line says "Ready: press Start." (issue 49 item 10).
    [panel]
    """
    panel = _setup(panel(TrainingPanel), qtbot, make_dataset(tmp_path / "data", per_class=6), epochs=2)
    view = panel.memory_plan
    panel.form.preset.setCurrentText("lora")
    qtbot.waitUntil(lambda: "fits" in view.summary.text(), timeout=20000)
    assert panel.controls.start_button.isEnabled()
    panel._on_failed(ValueError("no linear layer named qkvv"))  # as a start of the bad settings once ended
    panel.form.controls["lora_targets"].widget.setText("qkvv")  # typed, as the user does
    qtbot.waitUntil(lambda: "cannot plan" in view.summary.text(), timeout=20000)
    said = "blocks have no linear layer named qkvv; their linears are fc1, fc2, proj, qkv (--lora-targets)."
    assert view.summary.text() == f"Memory plan: cannot plan this run. VisionTransformer's {said}"
    assert not panel.controls.start_button.isEnabled() and said in panel.controls.start_button.toolTip()
    assert said in panel.controls.status.text()
    panel.form.controls["lora_targets"].widget.setText("qkv,proj")
    qtbot.waitUntil(lambda: "fits" in view.summary.text(), timeout=20000)
    assert panel.controls.start_button.isEnabled() and panel.controls.status.text() == "Ready: press Start."
