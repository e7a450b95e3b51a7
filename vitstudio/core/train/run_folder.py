"""A run's folder on disk: made ready before a run starts (or resumes), its checkpoint saved and restored, its
status written. The engine calls these with its run record (`engine._Run`)."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.files import atomic_torch_save, atomic_write_bytes
from vitstudio.core.train.recipes import TrainConfig
from vitstudio.core.train.runlock import RunFileError, remove_stale_files
from vitstudio.core.train.runs import CHECKPOINT, one_line, read_train_config

# what a run writes before its first finished epoch: a run holding only these can be started over
RUN_FILES = {".lock", "train_config.json", "split.json", "status.json", "metrics.csv", "tensorboard", "probe",
             "config.json", "model.safetensors", "class_indices.json", "head_start.json", "adapter"}


def prepare_run_folder(config: TrainConfig, resume: bool, out: Path, main: bool) -> tuple[TrainConfig, bool]:
    """(the config to run, whether there is a checkpoint to continue from), with the run folder made ready
    (under the run's lock): leftovers of interrupted writes removed; a run with no finished epoch started over."""
    if resume:  # the run in `out`, wherever it was first written (a renamed or copied run trains itself)
        config = read_train_config(out)
    has_checkpoint = (out / CHECKPOINT).exists()
    if main:
        remove_stale_files(out)
        if has_checkpoint and not resume:  # another process finished an epoch while we waited for the lock
            raise FileExistsError(f"{out} already exists; runs are never overwritten (pick another name, or "
                                  f"resume it).")
        if not has_checkpoint:
            clear_unfinished(out)
    return config, resume and has_checkpoint


def clear_unfinished(out: Path) -> None:
    """A run folder without a finished epoch holds nothing worth keeping: remove what the engine wrote there,
    and refuse (never delete) anything else."""
    import shutil

    foreign = sorted(p.name for p in out.iterdir() if p.name not in RUN_FILES)
    if foreign:
        raise FileExistsError(f"{out} exists and holds files ViT Studio did not write ({', '.join(foreign[:5])}); "
                              f"pick another run name.")
    for path in out.iterdir():
        if path.name != ".lock":
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def restore_checkpoint(run, state: dict) -> None:
    """The run's model, optimizer, schedule, EMA and RNG as of its last checkpoint (`state`, as read_checkpoint
    read it); where to go on from."""
    try:
        run.model.load_state_dict(state["model"])
        run.optimizer.load_state_dict(state["optimizer"])
        run.scheduler.load_state_dict(state["scheduler"])
        if run.ema is not None and state.get("ema") is not None:
            run.ema.module.load_state_dict(state["ema"])
        _restore_rng(run, state)
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        raise RunFileError(f"{run.out / CHECKPOINT} does not fit this run ({one_line(exc, 160)}); remove it to "
                           f"train the run from the start") from None
    run.start_epoch, run.best_acc, run.stale = state["epoch"] + 1, float(state["best_acc"]), state["stale"]
    run.best_loss, run.best_epoch = float(state.get("best_loss", math.inf)), int(state.get("best_epoch", -1))


def save_checkpoint(run, epoch_done: int) -> None:
    """Everything `restore_checkpoint` needs to continue after `epoch_done`."""
    atomic_torch_save({"model": run.model.state_dict(), "optimizer": run.optimizer.state_dict(),
                       "scheduler": run.scheduler.state_dict(),
                       "ema": run.ema.module.state_dict() if run.ema else None, "epoch": epoch_done,
                       "best_acc": run.best_acc, "best_loss": run.best_loss, "best_epoch": run.best_epoch,
                       "stale": run.stale, **_rng_states(run)},
                      run.out / CHECKPOINT)


def _rng_states(run) -> dict:
    """Every random source the next epoch draws from: torch's (dropout, LoRA's adapter dropout, timm's transforms),
    Python's (the flips and crops of the transforms), numpy's (mixup), the loader's shuffle, CUDA's: a resumed run
    draws the batches, crops and dropout masks an uninterrupted one draws."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    cuda = run.base.device.type == "cuda" and torch.cuda.is_available()
    return {"rng": torch.get_rng_state(), "rng_python": random.getstate(),
            "rng_numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
            "rng_loader": run.generator.get_state() if run.generator is not None else None,
            "rng_cuda": torch.cuda.get_rng_state_all() if cuda else None}


def _restore_rng(run, state: dict) -> None:
    """What `_rng_states` saved; a checkpoint from before it holds torch's alone."""
    torch.set_rng_state(state["rng"])
    if state.get("rng_python") is not None:
        version, keys, gauss = state["rng_python"]
        random.setstate((version, tuple(keys), gauss))
    if state.get("rng_numpy") is not None:
        name, keys, pos, has_gauss, gauss = state["rng_numpy"]
        np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    if state.get("rng_loader") is not None and run.generator is not None:
        run.generator.set_state(state["rng_loader"])
    if state.get("rng_cuda") is not None and run.base.device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng_cuda"])


def write_status(run, status: str, epochs_done: int) -> None:
    atomic_write_bytes(run.out / "status.json", json.dumps(
        {"status": status, "epochs_done": epochs_done, "best_val_acc": run.best_acc,
         "best_epoch": getattr(run, "best_epoch", -1), "pid": os.getpid(),
         "processes": run.dist_info.world, "data_path": run.config.data_path,
         "skipped": {**run.skipped, **run.loaders.failed}, "ignored": run.ignored, "warnings": run.warnings,
         "steps_per_epoch": getattr(run, "steps_per_epoch", None)},  # its learning-rate schedule, drawn again
        indent=1).encode())
