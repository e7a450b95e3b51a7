"""Every file dialog of the app, opening where the user last was: the folder of the last file or folder chosen in
any of them (kept in the app's settings, so a restart keeps it too), not the working folder the app happened to
start in. A save dialog proposes its file name in that folder."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QDialogButtonBox, QFileDialog, QLineEdit, QMessageBox

from vitstudio.gui.app_settings import app_settings

KEY = "last_dir"
EXPORT_KEY = "last_export_dir"


def last_folder() -> str:
    """The folder of the last choice, if it still exists; else the home folder."""
    folder = str(app_settings().value(KEY, "") or "")
    return folder if folder and os.path.isdir(folder) else str(Path.home())


def export_folder() -> str:
    """Where a model export's dialog opens: the folder of the last model export, else the models folder, where
    the runs being exported are (not the dataset folder a dialog chose last)."""
    from vitstudio.core.files import models_dir

    folder = str(app_settings().value(EXPORT_KEY, "") or "")
    return folder if folder and os.path.isdir(folder) else str(models_dir())


def remember_export(path: str) -> None:
    """The folder a model was exported into (a seed export: the folder itself) starts the next export."""
    if path:
        app_settings().setValue(EXPORT_KEY, path if os.path.isdir(path) else str(Path(path).parent))
    remember(path)


def remember(path: str) -> None:
    """The folder a chosen path is in (a folder chosen: itself) starts the next dialog."""
    if path:
        app_settings().setValue(KEY, path if os.path.isdir(path) else str(Path(path).parent))


def open_file(parent, title: str, filters: str = "") -> str:
    path, _ = QFileDialog.getOpenFileName(parent, title, last_folder(), filters)
    remember(path)
    return path


def open_files(parent, title: str, filters: str = "") -> list[str]:
    paths, _ = QFileDialog.getOpenFileNames(parent, title, last_folder(), filters)
    remember(paths[0] if paths else "")
    return paths


def save_file(parent, title: str, name: str, filters: str = "", **options) -> str:
    """`name` proposed in the last folder (a name with a folder of its own keeps it)."""
    proposed = name if os.path.dirname(name) else os.path.join(last_folder(), name)
    path, _ = QFileDialog.getSaveFileName(parent, title, proposed, filters, **options)
    if path and not made_if_missing(parent, title, Path(path).parent):  # Qt's dialog takes a typed folder that
        return ""  # does not exist; every export then failed with a raw [Errno 2] on its temporary file
    remember(path)
    return path


def made_if_missing(parent, title: str, folder: Path) -> bool:
    """Whether `folder` exists, after asking to make it when it does not (False: declined, or it could not be)."""
    if folder.is_dir():
        return True
    if QMessageBox.question(parent, title, f"{folder} does not exist. Create it?",
                            QMessageBox.Yes | QMessageBox.Cancel) != QMessageBox.Yes:
        return False
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        QMessageBox.warning(parent, title, f"Could not create {folder}: {exc.strerror or exc}")
        return False
    return True


def choose_folder(parent, title: str, create: bool = False, start: str | None = None) -> str:
    """An existing folder; with `create` (a folder to write into) a typed path that does not exist yet is offered to
    be made, as a save dialog offers a new file name. It opens in `start`, else the last folder."""
    if create:
        dialog = OutputFolderDialog(parent, title, start or last_folder())
        folder = dialog.selectedFiles()[0] if dialog.exec() else ""
    else:
        folder = QFileDialog.getExistingDirectory(parent, title, start or last_folder())
    remember(folder)
    return folder


class OutputFolderDialog(QFileDialog):
    """Qt's folder dialog greys Choose out while the typed path does not exist, which read as Choose ignoring the
    typed path, and a new output folder could only be made with its New Folder button. Here Choose stays enabled
    for a typed path that can be made, and asks before making it. A native dialog (a desktop's own) has no such
    line edit and offers a new folder itself."""

    def __init__(self, parent, title: str, folder: str) -> None:
        super().__init__(parent, title, folder)
        self.setFileMode(QFileDialog.Directory)
        self.setOption(QFileDialog.ShowDirsOnly, True)
        self.setLabelText(QFileDialog.Accept, "&Choose")
        self.name_edit = self.findChild(QLineEdit, "fileNameEdit")
        if self.name_edit is not None:  # after Qt's own slot, which disables Choose for a missing path
            self.name_edit.textChanged.connect(self._allow_new)

    def typed_path(self) -> Path | None:
        text = self.name_edit.text().strip() if self.name_edit is not None else ""
        return Path(self.directory().absolutePath(), os.path.expanduser(text)) if text else None

    def _allow_new(self) -> None:
        path = self.typed_path()
        if path is not None and not path.exists() and _nearest_existing(path).is_dir():
            self.findChild(QDialogButtonBox).button(QDialogButtonBox.Open).setEnabled(True)

    def accept(self) -> None:  # noqa: D102 (Qt's)
        path = self.typed_path()
        if path is not None and not path.exists():
            if not made_if_missing(self, self.windowTitle(), path):
                return
            self.name_edit.setText(str(path))
        super().accept()


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
