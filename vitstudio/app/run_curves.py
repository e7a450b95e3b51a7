"""What the Training tab draws of one run, Qt-free: its epochs and their figures, its learning rate (per step while
it runs, per optimizer update when read back), the probe image's attention after each epoch and its start from text.
The run in progress and a run shown from History are two of these, so showing an old run never touches the live
one's buffers; the records a run yields are added here, and a run folder is read back here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vitstudio.core.fields import EPOCH_CURVES

# L-BFGS takes full-batch steps with no schedule: its lr (1.0) is a line-search scale, not a curve to read
NO_SCHEDULE = "no learning-rate schedule:\nthe quick preset fits the head full batch (L-BFGS)"  # 2 lines: ~280 px


def lr_note(opt: str | None) -> str | None:
    """What the learning-rate plot says instead of a curve for a run with optimizer `opt`, or None (a curve)."""
    return NO_SCHEDULE if opt == "lbfgs" else None


def _no_epochs() -> dict[str, list]:
    return {k: [] for k in ("epoch", *EPOCH_CURVES)}


@dataclass
class RunCurves:
    epochs: dict[str, list] = field(default_factory=_no_epochs)  # "epoch" (1-based) and each of EPOCH_CURVES
    lr: list[tuple[float, float]] = field(default_factory=list)  # (epoch, rate)
    snapshots: list = field(default_factory=list)  # ProbeSnapshot, one per epoch
    head_start: object | None = None  # HeadStart: the head's start from the class names' text, once known
    lr_note: str | None = None  # said instead of a learning-rate curve (see lr_note)

    @classmethod
    def read(cls, folder: Path) -> RunCurves:
        """A run folder's curves as its files hold them."""
        from vitstudio.core.train.lr_schedule import run_schedule
        from vitstudio.core.train.probe import read_snapshots
        from vitstudio.core.train.runs import read_metrics, recorded_optimizer
        from vitstudio.core.train.text_head import read_head_start

        curves = cls(head_start=read_head_start(folder), lr_note=lr_note(recorded_optimizer(folder)),
                     snapshots=read_snapshots(folder))
        for row in read_metrics(folder):
            curves._append(row)
            if row.get("lr") is not None:  # a run read back: its rate at each epoch's end (live: at every step)
                curves.lr.append((row["epoch"] + 1, row["lr"]))
        curves.lr[:] = run_schedule(folder, curves.done) or curves.lr  # every update's rate, where it can say
        return curves

    def _append(self, figures) -> None:
        get = figures.get if isinstance(figures, dict) else lambda key: getattr(figures, key)
        for key, values in self.epochs.items():
            values.append(get(key) + (1 if key == "epoch" else 0))

    def add_epoch(self, metrics) -> None:
        """An EpochMetrics record of the run in progress."""
        self._append(metrics)

    def add_step(self, step, run: Path) -> None:
        """A StepProgress record: the rate at that step (a resumed run first gets the schedule of its earlier
        epochs, warm-up and all)."""
        if not self.lr and step.epoch:
            from vitstudio.core.train.lr_schedule import run_schedule

            self.lr.extend(run_schedule(run, step.epoch, step.steps) or [])
        self.lr.append((step.epoch + step.step / step.steps, step.lr))

    @property
    def done(self) -> int:
        """Epochs finished."""
        return len(self.epochs["epoch"])

    @property
    def best_val_acc(self) -> float | None:
        return max(self.epochs["val_acc"], default=None)

    def table(self) -> tuple[list[str], list[list[float]]] | None:
        """(columns, rows of one epoch each), or None before the first epoch: what File → Export data writes."""
        if not self.done:
            return None
        columns = list(self.epochs)
        return columns, [list(row) for row in zip(*(self.epochs[c] for c in columns), strict=True)]
