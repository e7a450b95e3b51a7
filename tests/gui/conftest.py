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


@pytest.fixture
def clip_dir(tmp_path):
    """A tiny random CLIP-style model saved as an OpenCLIP folder (tests/core/test_openclip.py builds it)."""
    from tests.core.test_openclip import CLIP_CFG, _build

    return _build(CLIP_CFG, tmp_path / "tiny-clip", safetensors=True)


@pytest.fixture(autouse=True)
def _no_debounce(monkeypatch):
    """Debounced work starts on the next turn of the event loop, not 120 ms later: tests wait on `busy()`
    (tests/gui/helpers.py) rather than sleep out the timer; test_explorers checks the real debounce."""
    from vitstudio.gui.explore.explorer_base import ExplorerPanel

    monkeypatch.setattr(ExplorerPanel, "DEBOUNCE_MS", 0)
