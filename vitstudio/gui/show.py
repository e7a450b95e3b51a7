"""`vitstudio.show(...)`: the window on a given App, from a script or a notebook (napari's `napari.Viewer()`,
FiftyOne's `launch_app`). In a script the call runs Qt's event loop until the window closes; in Jupyter after
`%gui qt` (IPython runs the loop) it returns the window at once and the notebook keeps driving the same App."""

from __future__ import annotations

import sys
from collections.abc import Iterable


def _loop_runs_elsewhere() -> bool:
    """IPython's Qt event loop integration (`%gui qt`) is on: the window lives while the cell returns."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return bool(shell and getattr(shell, "active_eventloop", None) in ("qt", "qt5", "qt6"))


def show(app=None, images: Iterable[str] = (), model: str | None = None, block: bool | None = None):
    """Open the main window on `app` (an `vitstudio.app.app.App`; a new one on the window's pools when None), with
    `images` in the strip and `model` loaded (the App's own model otherwise). `block`: run the event loop until the
    window closes (default: unless IPython's Qt loop is running). Returns the window."""
    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    qapp.setApplicationName("ViT Studio")
    window = MainWindow(app)
    if model:
        window.request_model(model)
    elif window.state.model is not None:  # loaded by the script before the window existed: every panel follows
        window.state.set_model(window.state.model)
    images = [str(p) for p in images]
    if images:
        window.add_paths(images)
    window.show()
    if block if block is not None else not _loop_runs_elsewhere():
        qapp.exec()
    return window
