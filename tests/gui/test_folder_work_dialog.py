"""File → Where folder work runs… (gui/folder/folder_work_dialog.py) draws the App's `folder_work` setting: this
machine, or a Ray cluster at an address; Test connection says what it finds in the dialog."""

from __future__ import annotations

import importlib.util

from PySide6.QtCore import QSettings

from vitstudio.app.folder_work import FolderWork
from vitstudio.app.jobs import ScriptRunner
from vitstudio.gui.folder.folder_work_dialog import FolderWorkDialog, restore_folder_work


def test_the_setting_is_the_apps_kept_between_sessions_and_a_bad_address_is_one_line(qtbot, tmp_path):
    """Choosing "a Ray cluster" enables the address and Test connection (greyed on this machine); what is typed is
    the setting's address and the Folder model's `cluster()`; closing keeps it in the window's settings and a new
    session restores it (an edited, invalid value leaves "this machine"); Test connection on an address where
    nothing listens says so in the dialog, in one line."""
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    work = FolderWork(ScriptRunner())
    dialog = FolderWorkDialog(work, settings)
    qtbot.addWidget(dialog)
    assert not dialog.address.isEnabled() and not dialog.test_button.isEnabled() and work.cluster() is None
    dialog.where.setCurrentIndex(dialog.where.findText("a Ray cluster"))
    assert work.state.where == "cluster" and dialog.address.isEnabled() and work.cluster() == ""
    dialog.address.setText("127.0.0.1:1")
    assert work.cluster() == "127.0.0.1:1"
    if importlib.util.find_spec("ray") is not None:
        dialog.test_button.click()
        line = dialog.line.text()
        assert line.startswith("Cannot run folder work there: cannot reach the Ray cluster at 127.0.0.1:1")
        assert "\n" not in line
    dialog.reject()
    again = FolderWork(ScriptRunner())
    restore_folder_work(again, settings)
    assert (again.state.where, again.cluster()) == ("cluster", "127.0.0.1:1")
    settings.setValue("folder_work/where", "the moon")
    fresh = FolderWork(ScriptRunner())
    restore_folder_work(fresh, settings)
    assert fresh.cluster() is None

