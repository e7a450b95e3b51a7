"""Small steps the GUI tests share: loading a model as the model bar does, waiting until the app has nothing left
to do."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from vitstudio.gui import workers
from vitstudio.gui.explore.explorer_base import ExplorerPanel


def load_in_window(window, qtbot, spec: str, weights: str | None = None, timeout: int = 60000):
    """Load `spec` through the model bar's path (on the CPU, fp32) and return the model once it is loaded."""
    with qtbot.waitSignal(window.state.model_loaded, timeout=timeout):
        window.request_model(spec, "cpu", "fp32", weights)
    return window.state.model


def busy() -> bool:
    """A job runs, or a panel waits to start one (its debounce timer: 0 ms in tests, still a turn of the loop)."""
    return bool(workers.running_jobs()) or any(
        isinstance(w, ExplorerPanel) and w.debouncing() for w in QApplication.allWidgets())


def settle(qtbot, timeout: int = 60000) -> None:
    """Until nothing runs or waits to run, then once more after the results queued by the last jobs are delivered
    (a delivered result may start more work)."""
    qtbot.waitUntil(lambda: not busy(), timeout=timeout)
    qtbot.wait(0)
    qtbot.waitUntil(lambda: not busy(), timeout=timeout)


def open_in_folder_tab(window, qtbot, folder) -> None:
    """The bundled demo model loaded (unless a model is), the Folder tab shown with `folder` opened, settled."""
    from vitstudio.core.models.demo import bundled_demo

    if window.state.model is None:
        with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
            window.request_model(str(bundled_demo()))
    window.show_tab("folder")
    window.folder.open_folder(str(folder))
    settle(qtbot)


def folder_panel(panel, qtbot, folder=None):
    """The Folder panel alone on its own AppState (the `panel` fixture) with the bundled demo model, and `folder`
    opened and settled if one is given: for the Folder tab's tests that need no other part of the window."""
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.gui.folder.folder_panel import FolderPanel

    widget = panel(FolderPanel, model=bundled_demo())
    if folder is not None:
        widget.open_folder(str(folder))
        settle(qtbot)
    return widget


def drag_on_map(plot, view_points) -> None:
    """A left-button drag through `view_points` (the map's coordinates) on a Folder map, as the mouse sends it to the
    plot's viewport (pyqtgraph's rate limit off meanwhile: a synthetic drag's moves come microseconds apart)."""
    import pyqtgraph as pg
    from PySide6.QtCore import QEvent, QPointF, Qt
    from PySide6.QtGui import QMouseEvent

    viewport = plot.viewport()
    pixels = [plot.mapFromScene(plot.getViewBox().mapViewToScene(pg.Point(*p))) for p in view_points]

    def send(kind, pos, button, buttons):
        QApplication.sendEvent(viewport, QMouseEvent(kind, QPointF(pos), QPointF(viewport.mapToGlobal(pos)), button,
                                                     buttons, Qt.NoModifier))

    limit = pg.getConfigOption("mouseRateLimit")
    pg.setConfigOptions(mouseRateLimit=-1)
    try:
        send(QEvent.MouseButtonPress, pixels[0], Qt.LeftButton, Qt.LeftButton)
        for pos in pixels[1:]:
            send(QEvent.MouseMove, pos, Qt.NoButton, Qt.LeftButton)
        send(QEvent.MouseButtonRelease, pixels[-1], Qt.LeftButton, Qt.NoButton)
    finally:
        pg.setConfigOptions(mouseRateLimit=limit)
