"""Every kind of dataset the Training panel takes, started from the panel with every preset, gives a run that
finishes (issue 29's GUI seam matrix, its training rows). Item 1: a labels file (the Labels tab's "Train a model…")
failed for every preset: the run scanned the labels file's folder ("has no class subfolders") instead of the file."""

from __future__ import annotations

import shutil

import pytest

from tests.core.synthetic_data import make_dataset
from tests.gui.test_training_panel import SPEC3
from vitstudio.core.train.recipes import PRESETS
from vitstudio.core.train.runs import run_status
from vitstudio.gui.training.training_panel import TrainingPanel


def _class_folders(tmp_path):
    return make_dataset(tmp_path / "folders", per_class=4)


def _train_val(tmp_path):
    root = tmp_path / "train-val"
    make_dataset(root / "train", per_class=3)
    make_dataset(root / "val", per_class=2, seed=1)
    return root


def _labels_file(tmp_path):
    """A CSV beside loose images (no class folders), as the Labels tab writes it."""
    folders = make_dataset(tmp_path / "made", per_class=4)
    loose = tmp_path / "loose"
    loose.mkdir()
    rows = ["path,label"]
    for image in sorted(folders.rglob("*.png")):
        name = f"{image.parent.name}-{image.name}"
        shutil.copy(image, loose / name)
        rows.append(f"{name},{image.parent.name}")
    (loose / "labels.csv").write_text("\n".join(rows) + "\n")
    return loose / "labels.csv"


KINDS = {"class folders": _class_folders, "train/ + val/": _train_val, "labels file": _labels_file}


@pytest.mark.parametrize("kind", KINDS)
def test_every_preset_finishes_on_every_dataset_kind(panel, qtbot, tmp_path, kind):
    """Class folders, train/ + val/, and a labels file beside loose images (as the Labels tab writes it): each of the
    six presets, started from the panel (1 epoch, tiny model), ends "finished" with its accuracy in the status line.
    [panel] [fine-tune] [parametrised ×3: dataset kinds, 6 presets each]
    """
    panel = panel(TrainingPanel)
    panel.set_dataset(str(KINDS[kind](tmp_path)))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    panel.dataset.base_model.setEditText(SPEC3)
    for preset in PRESETS:
        panel.form.preset.setCurrentText(preset)
        panel.form.advanced.setChecked(True)
        panel.form.state.update(epochs=1, batch_size=4, img_size=32)
        assert panel.controls.start_button.isEnabled(), (preset, panel.controls.start_button.toolTip())
        panel.start()
        qtbot.waitUntil(lambda: panel.job is not None and panel.job.done, timeout=60000)
        run = panel.shown_run
        assert run_status(run) == "finished", (kind, preset, panel.controls.status.text())
        status = panel.controls.status.text()
        assert "val accuracy" in status, (kind, preset, status)  # quick: the last step's


def test_another_dataset_shows_nothing_of_the_previous_run(panel, qtbot, tmp_path):
    """Item 8: after "Train a model…" switched the dataset the panel still showed the previous run (its accuracy,
    "finished · N epochs", its chance-level warning, the confusion axes of its classes); a run then started left
    "No results yet" on screen instead of its curves.

    After a finished run, another dataset clears the shown run, its results, curves, progress text and warnings; Start
    then shows the Curves tab. [panel] [fine-tune] Nor the previous run's class names on the confusion matrix's axes
    (the walk saw "8, 9" over an empty matrix).
    """
    panel = panel(TrainingPanel)
    panel.set_dataset(str(_class_folders(tmp_path)))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    panel.dataset.base_model.setEditText(SPEC3)
    panel.form.preset.setCurrentText("scratch")
    panel.form.advanced.setChecked(True)
    panel.form.state.update(epochs=1, batch_size=4, img_size=32)
    panel.start()
    qtbot.waitUntil(lambda: panel.results.report is not None, timeout=60000)
    panel.controls.show_warning("chance level", "chance level")  # (whether the tiny run reached chance varies)
    assert "finished" in panel.controls.progress.format() and panel.right.currentWidget() is panel.results
    panel.set_dataset(str(_labels_file(tmp_path)))  # what the Labels tab's "Train a model…" does
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None
                    and panel.dataset_actions.scan.labels_file is not None, timeout=10000)
    assert panel.shown_run is None and panel.results.report is None and not panel.shown.epochs["epoch"]
    assert "finished" not in panel.controls.progress.format() and not panel.controls.warnings
    for side in ("bottom", "left"):  # nor the old run's class names on the confusion matrix's axes (the walk)
        assert panel.results.cm_view.getAxis(side)._tickLevels in (None, [[]]), side
    panel.start()
    assert panel.right.currentWidget() is panel.curves  # the live curves, not the Results tab
    qtbot.waitUntil(lambda: panel.job is not None and panel.job.done, timeout=60000)
