"""What the app remembers (issue 21, items 4 and 8), driving real windows: a second MainWindow on the same data folder
gets back the Training form, its dataset (with the label review's exclusions), the Folder tab's folder and its
filters — nothing of it written into the dataset. Seed export from the GUI writes model.pth + class_indices.json
into the folder the user chose (it used to make a folder named like a file)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from PySide6.QtWidgets import QFileDialog, QInputDialog

from tests.conftest import TINY_SPEC
from tests.gui.test_folder_panel import _digits, _settle
from tests.gui.test_folder_undo import _files, _review
from vitstudio.core.models.demo import bundled_demo
from vitstudio.gui import workers


def _window(qtbot):
    from vitstudio.gui.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    return win


def _load_demo(window, qtbot) -> None:
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))


def test_a_second_window_restores_form_dataset_folder_filters_and_exclusions(qtbot, tmp_path):
    """A second MainWindow restores the Training form values, dataset with exclusions, Folder folder and filters (which
    filter as numpy says), but not "Table follows map box" (its box is not kept; restored alone it filtered by a box
    never drawn: the walk), hides the excluded review item; dataset untouched; settings.json holds them. [window: two
    MainWindows built directly] The Advanced switch, the base model and the dataset chosen are remembered from the
    Training state's fields.
    """
    data = _digits(tmp_path, per_class=2)
    before = _files(data)
    first = _window(qtbot)
    _load_demo(first, qtbot)
    panel = first.folder
    panel.open_folder(str(data))
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.results is not None, timeout=30000)
    panel.toolbar.predicted.setCurrentIndex(1)  # the first class the model predicts here
    chosen = panel.toolbar.predicted.currentData()
    panel.toolbar.min_conf.setValue(0.4)
    panel.toolbar.correctness.setCurrentIndex(1)  # correct ones
    panel.toolbar.follow_map.setChecked(True)  # not kept: its box is not (a box never drawn filtered the table)
    _review(panel, data, sorted((data / "3").iterdir()))
    review = panel.side.page("review")
    review.list.setCurrentRow(0)
    excluded = review.list.item(0).data(0x0100)[0]  # Qt.UserRole
    review.exclude_button.click()
    form = first.training.form
    form.preset.setCurrentText("full")
    form.controls["epochs"].set_value(37)
    form.advanced.setChecked(True)
    assert form.state.advanced  # a field of the form's state, remembered as such
    first.training.set_dataset(str(data))
    _settle(qtbot)
    first.close()
    workers.shutdown(5000)

    second = _window(qtbot)
    form2, training2 = second.training.form, second.training
    assert form2.preset.currentText() == "full" and form2.controls["epochs"].value() == 37
    assert form2.advanced.isChecked() and training2.dataset.folder.text() == str(data)
    assert training2.dataset_actions.exclude == [excluded]  # the review's exclusions go with the dataset
    _load_demo(second, qtbot)  # the remembered folder opens with the first model
    panel2 = second.folder
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel2.results is not None and panel2.toolbar.min_conf.value() == 0.4, timeout=30000)
    assert panel2.folder == str(data) and second.app.pages["review"].excluded == {excluded}
    assert panel2.toolbar.predicted.currentData() == chosen and panel2.toolbar.correctness.currentData() is True
    assert not panel2.toolbar.follow_map.isChecked()
    r = panel2.results
    labels = np.asarray(r.labels)[r.predicted]
    known = np.isin(np.asarray(r.given), np.asarray(r.labels))
    expected = np.nonzero((r.confidence >= 0.4) & (labels == chosen) & known & (labels == np.asarray(r.given)))[0]
    assert 0 < len(expected) < len(r) and sorted(panel2.visible_rows()) == expected.tolist()  # filters act
    _review(panel2, data, sorted((data / "3").iterdir()))
    review2 = panel2.side.page("review").list
    assert excluded not in [review2.item(i).data(0x0100)[0] for i in range(review2.count())]
    assert _files(data) == before  # nothing of this written into the dataset
    saved = json.loads((Path(os.environ["VITSTUDIO_DATA_DIR"]) / "settings.json").read_text())
    assert saved["folder"] == str(data) and saved["training_form"]["values"]["epochs"] == 37


def test_seed_export_writes_its_two_files_into_the_chosen_folder(window, qtbot, tmp_path, tiny_weights,
                                                                 monkeypatch):
    """GUI seed export writes model.pth and class_indices.json (labels) into the chosen folder, no folder named like a
    file. [window]
    """
    from vitstudio.gui import actions, file_dialogs
    from vitstudio.gui.model_export_dialog import MODEL_FORMATS

    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(TINY_SPEC, "cpu", "fp32", str(tiny_weights[0]))
    chosen = tmp_path / "for-upstream"
    chosen.mkdir()
    seed = next(label for label, fmt in MODEL_FORMATS.items() if fmt == "seed")
    monkeypatch.setattr(QInputDialog, "getItem", lambda *a, **k: (seed, True))
    monkeypatch.setattr(file_dialogs, "choose_folder", lambda *a, **k: str(chosen))
    # what a user typed into the old save dialog: it then made a folder called model.pth
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(chosen / "model.pth"), seed))
    actions.export_model(window)
    _settle(qtbot)
    assert (chosen / "model.pth").is_file() and (chosen / "class_indices.json").is_file()
    labels = window.state.model.labels
    assert json.loads((chosen / "class_indices.json").read_text()) == {str(i): name for i, name in enumerate(labels)}
    assert [p.name for p in chosen.iterdir() if p.is_dir()] == []  # no folder named like a file


def test_a_labels_file_dataset_is_restored_too(qtbot, tmp_path):
    """The walk: "Train a model…" from the Labels tab sets a labels file as the dataset; after a restart the form said
    "No dataset chosen." (only folders were restored).

    A labels file set as the Training dataset (the Labels tab's "Train a model…") comes back after a restart and scans
    as a labels file (only folders were restored: the walk). [window]
    """
    from tests.gui.test_training_sources import _labels_file

    labels = _labels_file(tmp_path)
    first = _window(qtbot)
    first.training.set_dataset(str(labels))
    qtbot.waitUntil(lambda: first.training.dataset_actions.scan is not None, timeout=10000)
    first.close()
    workers.shutdown(5000)
    second = _window(qtbot)
    assert second.training.dataset.folder.text() == str(labels)
    qtbot.waitUntil(lambda: second.training.dataset_actions.scan is not None, timeout=10000)
    assert second.training.dataset_actions.scan.labels_file is not None
