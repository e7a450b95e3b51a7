"""Window first: the main window's frame shows at once while torch, timm and the panels load on a worker thread.

Importing torch and timm takes ~4 s on a small machine; Qt alone shows a window in ~0.4 s. The frame (menus, model
bar, image strip, tabs, docks: `MainWindow(panels=False)`) needs only Qt, so images can be opened into it at once;
when the imports are done the panels are built on the GUI thread and take their tabs (`MainWindow.attach_panels`).
"""

from __future__ import annotations

import os
import time

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QWidget

# benchmarks and tests: print first-paint times, quit when the panels have painted (after the screenshot, with
# --screenshot)
PROBE_ENV = "VITSTUDIO_STARTUP_PROBE"


_imported = {"panels": False}  # set once import_heavy has finished ('torch' is in sys.modules while it imports)

# libraries a job imports at its first use, each ~50-600k objects that live until exit. Imported here, before
# workers.freeze_long_lived, they are frozen with torch and timm. Imported by the first label review (cleanlab,
# scikit-learn, SciPy, pandas: 1,230 modules) they were walked by the GUI thread's collector three times in a row,
# 62 + 113 + 113 ms, and every full pass after walked them again. ~1.5 s more before the panels on 2 slow cores;
# the frame is on screen meanwhile.
LAZY_LIBRARIES = ("cleanlab.filter", "cleanlab.rank", "sklearn.linear_model", "sklearn.model_selection",
                  "sklearn.pipeline", "captum.attr", "scipy.fftpack", "scipy.ndimage", "scipy.stats",
                  "torch.utils.tensorboard")  # a run's scalars: 188 modules (absl, protobuf) at the first run


def import_heavy(cancel) -> None:
    """Runs on a worker: the panels' modules, and with them torch and timm; then the libraries jobs use."""
    import importlib

    from vitstudio.app.job_modules import import_job_modules

    from .main_window import panel_classes

    panel_classes()
    import_job_modules()
    for name in LAZY_LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional one missing: its job says so when used
            pass
    _imported["panels"] = True


class FirstPaintProbe(QObject):
    """Prints `first-paint LABEL <epoch seconds> torch=<loaded>` on a widget's first paint (PROBE_ENV only);
    loaded: torch, timm and the panels' modules have finished importing."""

    def __init__(self, widget: QWidget, label: str, quit_after: bool = False) -> None:
        super().__init__(widget)
        self.label, self.quit_after, self.done = label, quit_after, False
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Paint and not self.done:
            self.done = True
            print(f"first-paint {self.label} {time.time():.4f} torch={_imported['panels']}", flush=True)
            if self.quit_after:
                from PySide6.QtCore import QTimer
                from PySide6.QtWidgets import QApplication

                QTimer.singleShot(0, QApplication.quit)
        return False


def probing() -> bool:
    return bool(os.environ.get(PROBE_ENV))
