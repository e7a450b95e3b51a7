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
    followed: str | None = None  # the model loaded that the base model follows (until the user picks another)

    def follow_loaded(self, name: str) -> None:
        """A model was loaded: the base model follows it unless the user chose another (typed or picked one)."""
        with self.batch():
            if not self.base_model or self.base_model == self.followed:
                self.base_model = name
            self.followed = name
