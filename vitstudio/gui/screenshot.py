"""`--screenshot PNG`: wait until no job is running, render the window, save it, quit."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from . import workers

TIMEOUT_S = 300


def screenshot_when_idle(window, path: str) -> None:
    started = time.monotonic()
    idle_polls = 0

    def poll() -> None:
        nonlocal idle_polls
        idle_polls = idle_polls + 1 if not workers.running_jobs() else 0
        if idle_polls >= 3 or time.monotonic() - started > TIMEOUT_S:
            timer.stop()
            QApplication.processEvents()
            ok = window.grab().save(path)
            print(f"screenshot {'saved to' if ok else 'FAILED:'} {path}")
            window.close()
            QApplication.quit()

    timer = QTimer(window, interval=200, timeout=poll)
    timer.start()
