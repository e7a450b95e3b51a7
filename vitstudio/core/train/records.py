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
    kind: str = ""  # "chance": the accuracy is at chance level (a view clears it once a run does better)


@dataclass(frozen=True)
class TrainResult:
    out_dir: Path
    status: str  # 'finished', 'early-stopped', 'cancelled' or 'interrupted'
    epochs_done: int
    best_val_acc: float
    report: EvalReport | None
    skipped: dict = field(default_factory=dict)  # path -> why, as in status.json
