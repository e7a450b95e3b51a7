"""Every file dialog opens where the user last was (issue 29, item 12: they opened in the working folder): the
folder of the last file or folder chosen in any dialog, kept in the app's settings (a restart keeps it); a save
dialog proposes its file name there; a folder that is gone falls back to the home folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from vitstudio.gui import actions, file_dialogs


def test_dialogs_open_in_the_last_folder_used(window, tmp_path, monkeypatch):
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
    (tmp_path / "runs").mkdir()
    file_dialogs.remember(str(tmp_path / "runs"))
    assert file_dialogs.last_folder() == str(tmp_path / "runs")
    file_dialogs.remember(str(tmp_path / "labels.csv"))
    assert file_dialogs.last_folder() == str(tmp_path)
    file_dialogs.remember("")  # a cancelled dialog changes nothing
    assert file_dialogs.last_folder() == str(tmp_path)
