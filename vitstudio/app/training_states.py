"""The Training tab's state, Qt-free: what its jobs are keyed by."""

from __future__ import annotations

from pathlib import Path

from .evented import ViewState


class TrainingState(ViewState):
    """What the Training tab's jobs are keyed by: the run shown and the dataset chosen (not the model or image)."""

    CONTEXT = ()
    run: Path | None = None  # the run folder shown (curves, gallery, history)
    dataset: str | None = None  # the dataset folder chosen in the form
