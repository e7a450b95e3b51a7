"""The main window's helpers for its work off the GUI thread: whether a model is a run's, and `Relay`, which carries
a download's progress back to the GUI thread. The jobs are the app layer's (vitstudio/app/window_jobs.py: the
strip's predictions; vitstudio/app/model_loader.py: loading a model)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal


def is_model_of(loaded, run: str) -> bool:
    """Whether `loaded` is the model of the run folder `run` (loaded from that folder)."""
    if loaded is None:
        return False
    try:
        return Path(loaded.name).resolve() == Path(run).resolve()
    except (OSError, ValueError):
        return False


class Relay(QObject):
    """Carries progress callbacks from a worker thread to the GUI thread (signal emission is thread-safe)."""

    download = Signal(int, int)
