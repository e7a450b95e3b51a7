"""Window first: a light window shows at once while torch, timm and the explorers load on a worker thread.

Importing torch and timm takes ~4 s on a small machine; Qt alone shows a window in ~0.4 s. `LoadingWindow`
needs only Qt, takes the saved geometry of the main window, and says what is happening; when the imports are
done the main window is built on the GUI thread and takes its place.
"""

from __future__ import annotations

import os
import sys
import time

from PySide6.QtCore import QEvent, QObject, QSettings, Qt
from PySide6.QtWidgets import QLabel, QProgressBar, QVBoxLayout, QWidget

# benchmarks and tests: print first-paint times, quit when the main window has painted (after the screenshot, with
# --screenshot)
PROBE_ENV = "VITSTUDIO_STARTUP_PROBE"


class LoadingWindow(QWidget):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("ViT Studio")
        settings = QSettings("ViT Studio", "ViT Studio")
        if not (settings.value("geometry") and self.restoreGeometry(settings.value("geometry"))):
            self.resize(1280, 820)
        title = QLabel("<h2>ViT Studio</h2>")
        self.message = QLabel("Loading PyTorch and timm…")
        busy = QProgressBar()
        busy.setRange(0, 0)
        busy.setMaximumWidth(320)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        for widget in (title, self.message, busy):
            layout.addWidget(widget, 0, Qt.AlignHCenter)
        layout.addStretch(2)


def import_heavy(cancel) -> None:
    """Runs on a worker: everything the main window needs (torch, timm, the panels)."""
    import vitstudio.gui.main_window  # noqa: F401


class FirstPaintProbe(QObject):
    """Prints `first-paint LABEL <epoch seconds> torch=<loaded>` on a widget's first paint (PROBE_ENV only)."""

    def __init__(self, widget: QWidget, label: str, quit_after: bool = False) -> None:
        super().__init__(widget)
        self.label, self.quit_after, self.done = label, quit_after, False
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Paint and not self.done:
            self.done = True
            print(f"first-paint {self.label} {time.time():.4f} torch={'torch' in sys.modules}", flush=True)
            if self.quit_after:
                from PySide6.QtCore import QTimer
                from PySide6.QtWidgets import QApplication

                QTimer.singleShot(0, QApplication.quit)
        return False


def probing() -> bool:
    return bool(os.environ.get(PROBE_ENV))
