"""The Training tab with a CLIP-style base model (issue 23 item 4): the head starts from the class names, the
curves show the validation before any step (the zero-shot accuracy) at epoch 0, and History shows it again."""

from __future__ import annotations

import pytest

from tests.core.synthetic_data import make_dataset
from tests.core.test_openclip import CLIP_CFG
from tests.core.test_text_head import _taught
from vitstudio.core.train.text_head import read_head_start
from vitstudio.gui.training.training_panel import TrainingPanel


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return _taught(CLIP_CFG, tmp_path_factory.mktemp("oc") / "tiny-clip", tmp_path_factory)


def test_curves_start_at_zero_shot(panel, qtbot, tmp_path, clip_dir):
    """text_head greyed for a model without a text tower, enabled and checked for CLIP; the run's head start (> 0.5) is
    drawn at epoch 0 with a start level line, cleared and replayed from History. [panel] [fine-tune]
    """
    panel = panel(TrainingPanel)
    panel.set_dataset(str(make_dataset(tmp_path / "data", per_class=12, size=40)))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    panel.form.advanced.setChecked(True)
    panel.dataset.base_model.setEditText("vit_small_patch16_224.augreg_in21k")  # no text tower: the option greys out
    assert not panel.form.inputs["text_head"].isEnabled() and not panel.form.inputs["prompt"].isEnabled()
    panel.dataset.base_model.setEditText(str(clip_dir))
    panel.form.preset.setCurrentText("quick")
    assert panel.form.inputs["text_head"].isChecked() and panel.form.inputs["text_head"].isEnabled()
    panel.start()
    qtbot.waitUntil(lambda: panel.job is not None and panel.job.done, timeout=60000)
    run = panel.shown_run
    start = read_head_start(run)
    assert start is not None and start.from_text and start.val_acc > 0.5
    assert [list(a) for a in panel.curves.lines["start_acc"].getData()] == [[0], [start.val_acc]]
    assert panel.curves.start_level.isVisible() and panel.curves.start_level.value() == start.val_acc
    panel.curves.clear_curves()
    assert not panel.curves.start_level.isVisible()
    panel.show_run(run)  # History: replayed from the run folder
    assert [list(a) for a in panel.curves.lines["start_acc"].getData()] == [[0], [start.val_acc]]
    assert panel.curves.start_level.isVisible()
