from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path, qapp):
    from PySide6.QtCore import QSettings

    for fmt in (QSettings.NativeFormat, QSettings.IniFormat):
        QSettings.setPath(fmt, QSettings.UserScope, str(tmp_path / "settings"))
    yield


@pytest.fixture
def window(qtbot):
    from vitstudio.gui import workers
    from vitstudio.gui.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    yield win
    workers.shutdown(5000)
