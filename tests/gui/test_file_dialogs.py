"""Every file dialog opens where the user last was (issue 29, item 12: they opened in the working folder): the
folder of the last file or folder chosen in any dialog, kept in the app's settings (a restart keeps it); a save
dialog proposes its file name there; a folder that is gone falls back to the home folder."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QFileDialog, QInputDialog, QMessageBox

from vitstudio.gui import actions, file_dialogs
from vitstudio.gui.folder.folder_sorting import ask_sort
from vitstudio.gui.model_export_dialog import MODEL_FORMATS, choose_model_export


def test_dialogs_open_in_the_last_folder_used(window, tmp_path, monkeypatch):
    """Open images… in a folder: Export view proposes view.png there, Open folder… and the Folder tab's Open folder…
    start there; once the folder is deleted, the home folder. [window]
    """
    photos = tmp_path / "holiday photos"
    photos.mkdir()
    asked: list[tuple[str, str]] = []

    def opening(parent, title, folder, filters=""):
        asked.append((title, folder))
        return [str(photos / "a.png")], ""

    def saving(parent, title, proposed, filters="", **options):
        asked.append((title, proposed))
        return "", ""  # cancelled

    monkeypatch.setattr(QFileDialog, "getOpenFileNames", opening)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", saving)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda parent, title, folder: asked.append(
        (title, folder)) or "")
    monkeypatch.chdir(tmp_path)
    actions.open_images(window)
    assert file_dialogs.last_folder() == str(photos)
    assert not actions.export_view(window)  # cancelled: nothing written, the dialog proposed the last folder
    assert asked[-1] == ("Export view as PNG", str(photos / "view.png"))
    actions.open_folder(window)
    assert asked[-1] == ("Open folder", str(photos))
    window.folder._choose_folder()  # the Folder tab's Open folder… too
    assert asked[-1] == ("Folder of images (subfolders are searched too)", str(photos))
    shutil.rmtree(photos)  # gone: the home folder, not a dialog in a folder that does not exist
    assert file_dialogs.last_folder() == str(Path.home())


def test_a_folder_chosen_is_remembered_itself_and_a_file_by_its_folder(tmp_path):
    """A folder is remembered as itself, a file by its folder; a cancelled dialog changes nothing."""
    (tmp_path / "runs").mkdir()
    file_dialogs.remember(str(tmp_path / "runs"))
    assert file_dialogs.last_folder() == str(tmp_path / "runs")
    file_dialogs.remember(str(tmp_path / "labels.csv"))
    assert file_dialogs.last_folder() == str(tmp_path)
    file_dialogs.remember("")  # a cancelled dialog changes nothing
    assert file_dialogs.last_folder() == str(tmp_path)


def _type_and_choose(qtbot, monkeypatch, tmp_path, typed: str, answer) -> tuple[str, list[str]]:
    """The sort's output folder dialog, `typed` into its name field and Choose clicked; the question answered with
    `answer`. (folder returned, questions asked)."""
    asked: list[str] = []
    monkeypatch.setattr(QMessageBox, "question", lambda _p, _t, text, *a, **k: asked.append(text) or answer)
    file_dialogs.remember(str(tmp_path))

    def type_it():
        dialog = next(w for w in QApplication.topLevelWidgets()
                      if isinstance(w, file_dialogs.OutputFolderDialog) and w.isVisible())
        qtbot.keyClicks(dialog.name_edit, typed)
        choose = dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.Open)
        assert choose.isEnabled()  # Qt's own dialog greys it out for a path that does not exist
        choose.click()
        if dialog.isVisible():  # the question was declined: the dialog stays for another choice
            dialog.reject()

    QTimer.singleShot(200, type_it)
    return file_dialogs.choose_folder(None, "Sort into which folder?", create=True), asked


def test_a_typed_output_folder_that_does_not_exist_is_offered_and_made(qtbot, tmp_path, monkeypatch):
    """The output folder dialog with a typed two-level path that does not exist: Choose is enabled, one question names
    it, Yes makes it and returns it, and it is remembered.
    """
    chosen, asked = _type_and_choose(qtbot, monkeypatch, tmp_path, "sorted/by class", QMessageBox.Yes)
    assert chosen == str(tmp_path / "sorted" / "by class") and Path(chosen).is_dir()
    assert asked == [f"{tmp_path / 'sorted' / 'by class'} does not exist. Create it?"]
    assert file_dialogs.last_folder() == chosen


def test_a_declined_output_folder_is_not_made(qtbot, tmp_path, monkeypatch):
    """The same, answered Cancel: nothing is made and nothing returned."""
    chosen, asked = _type_and_choose(qtbot, monkeypatch, tmp_path, "elsewhere", QMessageBox.Cancel)
    assert chosen == "" and len(asked) == 1
    assert not (tmp_path / "elsewhere").exists()


def test_a_typed_existing_output_folder_is_chosen_without_a_question(qtbot, tmp_path, monkeypatch):
    """A typed existing folder is returned with no question."""
    (tmp_path / "out").mkdir()
    chosen, asked = _type_and_choose(qtbot, monkeypatch, tmp_path, str(tmp_path / "out"), QMessageBox.Cancel)
    assert chosen == str(tmp_path / "out") and asked == []


def test_every_folder_the_app_writes_into_offers_a_new_one(window, monkeypatch):
    """Sort into, seed export and mask export ask with `create`; opening a folder to read does not.

    Sort into, the seed export and the mask export ask with `create`; Open folder does not. [window]
    """
    asked: list[tuple[str, bool]] = []
    monkeypatch.setattr(file_dialogs, "choose_folder", lambda _p, title, create=False, **_start: asked.append(
        (title, create)) or "")
    monkeypatch.setattr(QInputDialog, "getItem", lambda *a, **k: (next(
        label for label, fmt in MODEL_FORMATS.items() if fmt == "seed"), True))
    ask_sort(window, [], lambda out: None, 0.0, "", lambda *a: None)
    choose_model_export(window)
    window.attention.view_state.update(mask=50)
    monkeypatch.setattr(window.attention, "current_map", lambda: (np.zeros((2, 2)), None))
    monkeypatch.setattr(window.state, "selected", SimpleNamespace(path="x.png"))
    window.attention.export_mask()
    actions.open_folder(window)
    assert [create for _, create in asked] == [True, True, True, False], asked


def test_a_save_into_a_folder_that_does_not_exist_offers_to_make_it(window, tmp_path, monkeypatch):
    """The walk: ONNX, view PNG and data exports typed into a new folder failed ('[Errno 2]' on a temporary file, a
    traceback box; 'is the folder writable?'). Every save dialog now offers to make the folder, as the output-folder
    dialog does; declined, nothing is made and nothing written.

    [window]
    """
    target = tmp_path / "exports" / "new" / "view.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    asked: list[str] = []
    answer = [QMessageBox.Cancel]
    monkeypatch.setattr(QMessageBox, "question", lambda _p, _t, text, *a, **k: asked.append(text) or answer[0])
    assert actions.export_view(window) is False
    assert asked == [f"{target.parent} does not exist. Create it?"] and not (tmp_path / "exports").exists()
    answer[0] = QMessageBox.Yes
    assert actions.export_view(window) is True and target.is_file()
    assert not window.error_indicator.notices


def test_export_model_opens_in_the_models_folder_then_in_the_last_export_folder(qapp, tmp_path, monkeypatch):
    """Issue 49 item 11: Export model's dialog opened in the dataset folder a dialog chose last, not where runs and
    exports are. Both formats open in the models folder, then where the last model export went."""
    from vitstudio.core.files import models_dir

    dataset, exports = tmp_path / "dataset", tmp_path / "exports"
    dataset.mkdir()
    exports.mkdir()
    models_dir().mkdir(parents=True, exist_ok=True)
    file_dialogs.remember(str(dataset))  # the dataset folder was the last one chosen
    proposed: list[str] = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda _p, _t, name, *a, **k: proposed.append(name) or (
        str(exports / "run.onnx"), ""))
    monkeypatch.setattr(file_dialogs, "OutputFolderDialog", lambda _p, _t, folder: proposed.append(folder) or (
        SimpleNamespace(exec=lambda: False)))
    for fmt in ("onnx", "seed", "onnx", "seed"):
        monkeypatch.setattr(QInputDialog, "getItem", lambda *a, fmt=fmt, **k: (next(
            label for label, f in MODEL_FORMATS.items() if f == fmt), True))
        choose_model_export(None, "run")
    assert proposed == [str(models_dir() / "run.onnx"), str(exports), str(exports / "run.onnx"), str(exports)]
