"""Every file dialog of the app, opening where the user last was: the folder of the last file or folder chosen in
any of them (kept in the app's settings, so a restart keeps it too), not the working folder the app happened to
start in. A save dialog proposes its file name in that folder."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from vitstudio.gui.app_settings import app_settings

KEY = "last_dir"


def last_folder() -> str:
    """The folder of the last choice, if it still exists; else the home folder."""
    folder = str(app_settings().value(KEY, "") or "")
    return folder if folder and os.path.isdir(folder) else str(Path.home())


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
    remember(path)
    return path


def choose_folder(parent, title: str) -> str:
    folder = QFileDialog.getExistingDirectory(parent, title, last_folder())
    remember(folder)
    return folder
