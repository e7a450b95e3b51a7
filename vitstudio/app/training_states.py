"""The Training tab's state, Qt-free: what its jobs are keyed by, and what a run starts from."""

from __future__ import annotations

from pathlib import Path

from .evented import ViewState


class TrainingState(ViewState):
    """What the Training tab's jobs are keyed by: the run shown and the dataset chosen (not the model or image)."""

    CONTEXT = ()
    run: Path | None = None  # the run folder shown (curves, gallery, history)
    dataset: str | None = None  # the dataset folder chosen in the form
    # what the next run starts from, besides the form's settings
    base_model: str | None = None  # a model spec; None: the model loaded
    run_name: str | None = None  # its folder's name under models/; None: named after the dataset and preset
    probe: str | None = None  # the image whose attention is snapshotted each epoch; None: the first validation one
    multi_gpu: bool = False  # DDP over every GPU, through torchrun
