"""What a training run reports while it runs and when it ends: progress per step, metrics per epoch, warnings,
the result. Shared by the engine and the quick preset (core/train/quick.py); `engine` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vitstudio.core.train.evaluation import EvalReport


@dataclass(frozen=True)
class StepProgress:
    epoch: int
    epochs: int
    step: int
    steps: int
    loss: float
    lr: float
    img_per_s: float
    eta_s: float


@dataclass
class RunClock:
    """Where this process's part of a run spends its time, for a whole-run ETA: the steps' time over the share of
    the epochs' steps done, plus the mean validation pass for each pass still to come. The rate of the current
    epoch's steps alone made the ETA jump (0m08s → 0m16s → 1m50s → 0m14s over four epochs): it left out validation
    and restarted slow after every epoch."""

    started: float = 0.0  # monotonic time of the first step (0: not yet)
    validation: float = 0.0  # seconds spent in validation passes
    passes: int = 0

    def validated(self, seconds: float) -> None:
        self.validation, self.passes = self.validation + seconds, self.passes + 1

    def eta(self, now: float, done: float, total: int) -> float:
        """Seconds left at `now`, `done` epochs' worth of steps of `total` having run."""
        if done <= 0:
            return 0.0
        steps = max(0.0, now - self.started - self.validation)
        per_pass = self.validation / self.passes if self.passes else 0.0
        return steps / done * (total - done) + per_pass * max(0, total - self.passes)


@dataclass(frozen=True)
class EpochMetrics:
    epoch: int
    train_loss: float
    train_acc: float
    val_loss: float
    val_acc: float
    lr: float
    seconds: float
    best: bool


@dataclass(frozen=True)
class RunWarning:
    """Something the user should know during a run (shown by the CLI and the GUI, kept in status.json)."""

    message: str
    kind: str = ""  # "chance level": the accuracy is at chance level
    update: bool = False  # replaces the earlier warning of its kind (not printed again); an empty message withdraws it


@dataclass(frozen=True)
class TrainResult:
    out_dir: Path
    status: str  # 'finished', 'early-stopped', 'cancelled' or 'interrupted'
    epochs_done: int
    best_val_acc: float
    report: EvalReport | None
    skipped: dict = field(default_factory=dict)  # path -> why, as in status.json
    best_epoch: int = -1  # the epoch (from 0) whose model the run folder holds; -1: not told

    @property
    def kept(self) -> str:
        """' (the model of epoch N)' for the status lines, when told."""
        return f" (the model of epoch {self.best_epoch + 1})" if self.best_epoch >= 0 else ""
