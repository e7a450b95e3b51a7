"""A run's learning-rate schedule: timm's cosine with a linear warm-up, stepped per optimizer update, and the same
schedule replayed without a model, so the whole curve of a run can be drawn — a run read back (its metrics log has
one rate per epoch, which hides the warm-up) or resumed (its live steps start at the checkpoint)."""

from __future__ import annotations

import math
from pathlib import Path

import timm.scheduler
import torch

from vitstudio.core.train.recipes import TrainConfig
from vitstudio.core.train.runs import RunFileError, read_json_object, read_train_config


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, steps_per_epoch: int):
    scheduler, _ = timm.scheduler.create_scheduler_v2(
        optimizer, sched="cosine", num_epochs=config.epochs, warmup_epochs=int(config.warmup_epochs),
        min_lr=config.lr * config.min_lr_ratio, warmup_lr=config.lr * 0.01, step_on_epochs=config.step_on_epochs,
        updates_per_epoch=steps_per_epoch)
    return scheduler


def schedule_curve(config: TrainConfig, steps_per_epoch: int, until_epoch: int | None = None,
                   ) -> list[tuple[float, float]]:
    """(epoch + update / updates per epoch, rate) after every update, as the engine steps the scheduler (the rate
    of a group with no layer-decay scale: the head's), for the epochs before `until_epoch` (all by default)."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=config.lr)
    scheduler = make_scheduler(optimizer, config, max(1, steps_per_epoch))
    curve = []
    for epoch in range(config.epochs if until_epoch is None else min(until_epoch, config.epochs)):
        for update in range(1, steps_per_epoch + 1):
            scheduler.step_update(epoch * steps_per_epoch + update)
            curve.append((epoch + update / steps_per_epoch, optimizer.param_groups[-1]["lr"]))
        scheduler.step(epoch + 1)
    return curve


def run_schedule(folder, until_epoch: int | None = None, loader_steps: int | None = None,
                 ) -> list[tuple[float, float]] | None:
    """The schedule of the run in `folder` (from its train_config.json, and the updates per epoch its status.json
    recorded, or `loader_steps` batches of the run in progress), or None when it cannot be told: no readable
    settings, L-BFGS (no schedule), an older run that did not record its steps."""
    try:
        config = read_train_config(Path(folder))
        recorded = read_json_object(Path(folder) / "status.json").get("steps_per_epoch")
    except (RunFileError, ValueError, TypeError):
        return None
    steps = math.ceil(loader_steps / config.grad_accum) if loader_steps else recorded
    if config.opt == "lbfgs" or not isinstance(steps, int) or steps < 1:
        return None
    return schedule_curve(config, steps, until_epoch)
