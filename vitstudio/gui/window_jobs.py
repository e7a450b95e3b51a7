"""The main window's work off the GUI thread: loading a model (with download progress carried back by a signal)
and classifying the strip's images; torch is imported inside them (the window itself is built without it)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

CLASSIFY_BATCH = 8


def load_model_job(cancel, spec: str, weights: str | None, device: str, precision: str, relay: Relay):
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.models.modelcard import model_card

    loaded = load_model(spec, weights, device, precision, progress=lambda d, t, m: relay.download.emit(d, t))
    model_card(loaded)  # FLOPs need a forward: do it here, not on the GUI thread
    return loaded


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
