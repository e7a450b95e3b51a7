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
    skipped: dict = field(default_factory=dict)  # path -> why: inputs meant to be used and left out (status.json)
    best_epoch: int = -1  # the epoch (from 0) whose model the run folder holds; -1: not told
    ignored: dict = field(default_factory=dict)  # path -> why: files the folder walk met that are no image (notes.txt)
    last_kept: bool = False  # the run folder holds the last step's model (the quick head), not the best-scoring one

    @property
    def kept(self) -> str:
        """' (the model of epoch N)' for the status lines, when told; the quick head's says it is the last step's."""
        if self.last_kept and self.best_epoch >= 0:
            return (f" (the head of step {self.best_epoch + 1}, the last: the loss's minimum; * marks the step that "
                    f"scored best)")
        return f" (the model of epoch {self.best_epoch + 1})" if self.best_epoch >= 0 else ""

    @property
    def accuracy_name(self) -> str:
        """What the status lines call `best_val_acc`: the kept model's validation accuracy."""
        return "val accuracy" if self.last_kept else "best val accuracy"


def chance_warning(run, epoch: int, num_classes: int) -> RunWarning | None:
    """From the second epoch: a best validation accuracy still at chance level means something is off. Said once
    (the CLI prints it once), then updated each epoch with the new figure while it lasts, and withdrawn (an empty
    message) once the run does better; status.json keeps the latest."""
    at_chance = run.best_acc <= 1.25 / num_classes
    said = next((i for i, w in enumerate(run.warnings) if "chance level" in w), None)
    if epoch < max(1, run.start_epoch) or (said is None and not at_chance):
        return None
    if not at_chance:
        del run.warnings[said]
        return RunWarning("", kind="chance level", update=True)
    message = chance_message(run.best_acc, num_classes, epoch + 1, run.config.scope)
    if said is None:
        run.warnings.append(message)
        return RunWarning(message, kind="chance level")
    run.warnings[said] = message
    return RunWarning(message, kind="chance level", update=True)


# What to train instead when the base model's features may not fit the data: more of the network than now (advising
# the preset already chosen, "try last-blocks or full" under full, sent users round in a circle).
_TRAIN_MORE = {"head": "last-blocks or full", "head+pre_logits": "last-blocks or full", "last-blocks": "full",
               "lora": "a higher adapter rank, more adapter targets, or full",
               "dora": "a higher adapter rank, more adapter targets, or full"}


def chance_message(best_acc: float, num_classes: int, epochs: int, scope: str) -> str:
    """Why a run can be at chance level, for what it trains (`scope`): a frozen backbone is a cause only while
    part of it is frozen, and the advice names only what trains more."""
    causes = ["a learning rate far too high or too low for this preset",
              "augmentation too strong for these images (try a larger minimum scale, no flip)",
              "too few images per class"]
    if scope in _TRAIN_MORE:
        causes.append(f"a base model whose features do not fit the data with the backbone frozen (try "
                      f"{_TRAIN_MORE[scope]})")
    return (f"Validation accuracy is still at chance level ({best_acc * 100:.1f} % for {num_classes} classes after "
            f"{epochs} epochs). Likely causes: {'; '.join(causes)}; or labels that do not follow the folders.")
