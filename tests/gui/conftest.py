from __future__ import annotations

import time

import pytest


@pytest.fixture(autouse=True)
def _close_without_asking(monkeypatch):
    """A window closed at a test's end over a run still training cancels it, as before the question existed (a
    modal box would wait forever offscreen); test_close_during_training answers the question itself."""
    from vitstudio.gui import closing

    monkeypatch.setattr(closing, "ask_close_during_training", lambda *_: closing.CANCEL)


@pytest.fixture(autouse=True)
def _earlier_objects_frozen():
    """What is alive when a test starts (the modules earlier tests imported, module-scoped fixtures) is frozen, as
    tests/conftest.py freezes the imports after collection: the window's teardown collects twice (its closeEvent's
    workers.shutdown, then the `window` fixture's), and each full pass walked every object the earlier tests left
    alive — 55k-220k of them, 0.05-0.2 s a pass — and so did Python's own oldest-generation passes. Collected
    first, so no garbage is frozen; what the test itself makes is collected as before. The widgets an earlier test
    left to deleteLater (qtbot closes its widgets after the fixtures' teardown) are deleted before that collection:
    collected first, their Python halves were cleared while Qt still held them, and the delete Qt did later in the
    next test sent hide and show events to methods whose attributes were gone (the Match page's, once)."""
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is not None:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    gc.freeze()
    yield


MODAL_LIMIT_S = 10


@pytest.fixture(autouse=True)
def _no_modal_dialog_waits_forever(qapp):
    """A modal dialog a test forgot to answer waits for a user who never comes: offscreen, the whole run hung at 98 %
    until CI killed it (a test patched the Qt dialog its code no longer opened). Any modal dialog still up after
    MODAL_LIMIT_S is rejected and fails the test with its title. A timer on the application fires inside every nested
    event loop, Qt's static dialogs included; a dialog a test drives itself closes in well under a second."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QDialog

    since: dict[int, float] = {}
    left_open: list[str] = []

    def check() -> None:
        modal = QApplication.activeModalWidget()
        if modal is None:
            since.clear()
            return
        first = since.setdefault(id(modal), time.monotonic())
        if time.monotonic() - first > MODAL_LIMIT_S:
            left_open.append(f"{type(modal).__name__} {modal.windowTitle()!r}")
            modal.reject() if isinstance(modal, QDialog) else modal.close()

    timer = QTimer(interval=1000, timeout=check)
    timer.start()
    yield
    timer.stop()
    assert not left_open, f"modal dialogs left waiting for a user (rejected after {MODAL_LIMIT_S} s): {left_open}"


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path, qapp):
    """Qt's per-user settings folder points into the test's tmp_path/settings: the app keeps its settings in the
    data folder (VITSTUDIO_DATA_DIR, per test), and test_window_settings checks that nothing is written here."""
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
def panel(qtbot):
    """`panel(Kind, model=None, images=(), catalog=())`: one panel on its own AppState, shown at 1100×700, with the
    model loaded directly (`load_model` on the CPU in fp32, or a LoadedModel given) and the images added, the first
    selected — for the tests of one panel (~0.1 s to build against ~0.85 s for the window's ten panels, docks and
    catalog). `window` stays for what needs the whole window: menus, tabs, the Load path, session memory."""
    import inspect

    from vitstudio.app.app import App
    from vitstudio.app.app_state import make_entry
    from vitstudio.core.data.images import read_image
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.models.model import LoadedModel
    from vitstudio.gui import workers
    from vitstudio.gui.common.wheel_guard import install_wheel_guard
    from vitstudio.gui.imaging import configure_pyqtgraph

    def make(kind, model=None, images=(), catalog=()):
        configure_pyqtgraph()  # what MainWindow sets up app-wide before its panels exist
        install_wheel_guard()
        workers.collect_garbage_on_gui_thread()
        app = App(workers.QT_RUNNER)
        state = app.state
        takes_catalog = "catalog_names" in inspect.signature(kind).parameters  # Compare, Training: the model list
        widget = kind(app, list(catalog)) if takes_catalog else kind(app)
        qtbot.addWidget(widget)
        widget.resize(1100, 700)
        widget.show()
        if model is not None:
            state.set_model(model if isinstance(model, LoadedModel) else load_model(str(model), device="cpu",
                                                                                    precision="fp32"))
        if images:
            state.add_images([make_entry(str(path), read_image(path)) for path in images])
        return widget

    yield make
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
