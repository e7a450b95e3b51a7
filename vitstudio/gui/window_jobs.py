"""The main window's work off the GUI thread: classifying the strip's images, torch imported inside (the window is
built without it). Loading a model is the app layer's (vitstudio/app/model_loader.py); `Relay` carries a download's
progress back to the GUI thread."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

CLASSIFY_BATCH = 8


def classify_job(cancel, loaded, todo: list):
    """Predictions for `todo` in batches, the first batch (the image on screen first) as soon as it is ready."""
    from vitstudio.core.inference import classify

    for start in range(0, len(todo), CLASSIFY_BATCH):
        cancel.raise_if_cancelled()
        chunk = todo[start:start + CLASSIFY_BATCH]
        preds = classify(loaded, [e.image for e in chunk], [e.path for e in chunk])
        yield list(zip(chunk, preds))


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
