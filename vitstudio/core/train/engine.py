"""The fine-tuning engine: `fine_tune(config, cancel)` is a generator of progress records returning a TrainResult.

The same generator runs under the CLI (progress bar), the GUI worker and the tests. It checks `cancel` (and
waits while paused) between batches; on cancel it saves the last checkpoint and returns.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import timm
import timm.optim
import timm.scheduler
import timm.utils
import torch
from torch import nn

from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.data.datasets import Split
from vitstudio.core.distributed import (
    DistInfo,
    barrier,
    broadcast_flag,
    device_for,
    finish,
    init_distributed,
    sum_across,
)
from vitstudio.core.files import atomic_write_bytes, deferred_interrupt, die_at
from vitstudio.core.jobs import Cancelled, CancelToken, Progress, Throttle
from vitstudio.core.models.devices import explain_out_of_memory
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.train.adapters import add_adapters, is_adapter_run, merged_copy, save_adapter_folder, unwrap
from vitstudio.core.train.evaluation import evaluate, validation_pass
from vitstudio.core.train.losses import class_weights, loss_fns  # noqa: F401  (class_weights: public API)
from vitstudio.core.train.lr_schedule import make_scheduler
from vitstudio.core.train.model_prep import (
    data_config_for,
    freeze,
    new_head,
    set_drop_path,
    set_grad_checkpointing,
)
from vitstudio.core.train.ood_fit import write_ood_bank
from vitstudio.core.train.optimizer import make_optimizer
from vitstudio.core.train.probe import ProbeSnapshot, probe_image, probe_snapshot, save_snapshot  # noqa: F401
from vitstudio.core.train.recipes import TrainConfig
from vitstudio.core.train.records import (  # noqa: F401  (re-exported)
    EpochMetrics,
    RunClock,
    RunWarning,
    StepProgress,
    TrainResult,
    chance_message,
    chance_warning,
)
from vitstudio.core.train.run_folder import prepare_run_folder, restore_checkpoint, save_checkpoint, write_status
from vitstudio.core.train.run_plan import refuse_what_cannot_fit
from vitstudio.core.train.runlock import RunLock
from vitstudio.core.train.runs import (
    CHECKPOINT,
    STOPPED,
    MetricsLog,
    read_checkpoint,
    save_model_folder,
)
from vitstudio.core.train.text_head import HeadStart, TextInit, start_from_text, write_head_start
from vitstudio.core.train.training_data import make_loaders, prepare_split


def _seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def fine_tune(config: TrainConfig, cancel: CancelToken | None = None, resume: bool = False) -> Iterator:
    """Fine-tune and write models/<run>/. Yields Progress / StepProgress / EpochMetrics / ProbeSnapshot.

    Under torchrun every process runs this generator: each trains on its shard through DDP, rank 0 writes.
    """
    cancel = cancel or CancelToken()
    out = Path(config.out_dir)
    if resume:
        if not (out / "train_config.json").exists():
            raise FileNotFoundError(f"Nothing to resume in {out}: it has no train_config.json (it was stopped before "
                                    f"it recorded its settings); start it again with its settings.")
    else:
        config.validate()  # before anything is created: e.g. an output folder inside the dataset is refused
        if (out / CHECKPOINT).exists():
            raise FileExistsError(f"{out} already exists; runs are never overwritten (pick another name, or "
                                  f"resume it).")
        refuse_what_cannot_fit(config)
    dist_info = init_distributed()
    created = not out.exists()
    lock = RunLock(out).acquire() if dist_info.main else None  # one process owns a run; fails at once if taken
    try:
        result = yield from _fine_tune(config, cancel, resume, out, dist_info)
    finally:
        if lock is not None:
            die_at("release-lock")
            lock.release()
            if created and {p.name for p in out.iterdir()} <= {".lock"}:  # a start that failed leaves nothing
                (out / ".lock").unlink(missing_ok=True)
                out.rmdir()
        finish(dist_info)
    return result


@dataclass
class _Run:
    """Everything one training run holds, built once by `_build_run`; the epoch loop reads and updates it."""

    config: TrainConfig
    out: Path
    dist_info: DistInfo
    split: Split
    base: LoadedModel
    model: nn.Module  # the bare model (saved, evaluated, EMA source)
    train_model: nn.Module  # what the steps call: the model, or its DDP / compiled wrapper
    cfg: dict  # data config of the run
    loaders: object
    optimizer: torch.optim.Optimizer
    scheduler: object
    steps_per_epoch: int
    ema: object | None
    scaler: object | None
    mixup: object | None
    criterion: nn.Module
    trainable: int
    start_epoch: int = 0
    best_acc: float = -1.0
    best_loss: float = math.inf  # breaks a tie in accuracy: 100 % of 8 validation images at epoch 1 kept epoch 1
    best_epoch: int = -1  # the epoch whose model is saved
    stale: int = 0
    warnings: list = field(default_factory=list)
    text: TextInit | None = None  # the head's start from the class names' text embeddings (CLIP-style bases)
    head_note: str = ""
    skipped: dict = field(default_factory=dict)  # path -> why: files the scan or the data path could not use
    ignored: dict = field(default_factory=dict)  # path -> why: what the folder walk met that is no image to use
    clock: RunClock = field(default_factory=RunClock)  # for the whole-run ETA
    generator: torch.Generator | None = None  # the loader's shuffle: saved and restored with the checkpoint

    @property
    def device(self) -> torch.device:
        return self.base.device

    @property
    def eval_model(self) -> nn.Module:
        return self.ema.module if self.ema is not None else self.model


def _fine_tune(config: TrainConfig, cancel: CancelToken, resume: bool, out: Path, dist_info: DistInfo):
    config, resume = prepare_run_folder(config, resume, out, dist_info.main)
    if config.data_path == "features":  # the quick preset: a head fitted on cached features (quick.py)
        from vitstudio.core.train.quick import quick_run

        return (yield from quick_run(config, cancel, resume, out, dist_info))
    # read first: a damaged or hostile checkpoint is refused before the dataset is scanned and the model loaded
    checkpoint = read_checkpoint(out) if resume else None
    run = yield from _build_run(config, cancel, checkpoint, out, dist_info)
    if not resume:
        yield _head_start(run)
    total = sum(p.numel() for p in run.model.parameters())
    yield Progress(0, 0, f"Training {run.trainable / 1e6:.2f} M of {total / 1e6:.2f} M parameters on "
                         f"{run.loaders.images * dist_info.world} images ({config.data_path} data path"
                         f"{f', {dist_info.world} processes' if dist_info.enabled else ''}), validating on "
                         f"{len(run.split.val)}")
    status, epochs_done = yield from _train_epochs(run, cancel)
    report = None
    if dist_info.main:
        try:  # stopped during the evaluation, the run resumes to it (every epoch is done)
            if (out / "model.safetensors").exists() and status not in STOPPED:
                report = yield from _final_evaluation(run, cancel)
        except Cancelled:
            status = "cancelled"
        except KeyboardInterrupt:
            write_status(run, "interrupted", epochs_done)
            raise
        # last: "finished" promises everything the run writes (model, metrics, eval.json) is on disk
        write_status(run, status, epochs_done)
    barrier(dist_info)
    return TrainResult(out, status, epochs_done, run.best_acc, report, {**run.skipped, **run.loaders.failed},
                       run.best_epoch, run.ignored)


def _head_start(run: _Run) -> HeadStart:
    """How the head started, written to the run folder; for a head from the class names, with the validation
    before any step (the zero-shot accuracy on this split)."""
    if run.text is None:
        start = HeadStart(run.head_note)
    else:
        val_loss, val_acc = validation_pass(run.model, run.loaders.val, run.base.autocast, run.dist_info)
        start = HeadStart(run.head_note, True, run.text.templates, val_loss, val_acc)
    if run.dist_info.main:
        write_head_start(run.out, start)
    return start


def _final_evaluation(run: _Run, cancel: CancelToken):
    """The best model on the validation split, written to eval.json; returns the EvalReport."""
    best = load_model(str(run.out), device=str(run.device), precision=run.config.precision)
    report = yield from evaluate(best, run.split.val, list(run.split.classes), run.config.batch_size, cancel)
    atomic_write_bytes(run.out / "eval.json", json.dumps(report.to_json(), indent=1).encode())
    # the bank that tells later predictions whether an image is like this run's data (core/models/ood.py)
    yield from write_ood_bank(best, run.split.train, run.split.val, run.split.classes, run.out,
                              run.config.batch_size, cancel, run.config.extra.get("data_description"), run.config.seed)
    return report


def _build_run(config: TrainConfig, cancel: CancelToken, checkpoint: dict | None, out: Path, dist_info: DistInfo):
    """Split, base model with its new head, data, optimizer, schedule, EMA; restored from `checkpoint` (the run's
    checkpoint-last.pt as read) when resuming, else the run folder is created. Yields progress while it works."""
    resume = checkpoint is not None
    yield Progress(0, 0, "Scanning the dataset")
    split, skipped, ignored, data_warnings = prepare_split(config, out)
    for warning in data_warnings:
        yield RunWarning(warning)
    if not split.val:
        raise ValueError("The validation split is empty.")
    generator = _seed_everything(config.seed + dist_info.rank)
    yield Progress(0, 0, f"Loading {config.model}")
    base = load_model(config.model, config.weights, device_for(dist_info, config.device), config.precision)
    text, why_not_text = (None, None) if resume else start_from_text(
        base, config, list(split.classes), None, [str(p) for p, _ in split.train])
    if why_not_text:
        yield RunWarning(why_not_text)
    model, cfg, head_note = _prepare_model(base, config, list(split.classes), text)
    yield Progress(0, 0, f"{base.display_name}: {head_note}")
    if is_adapter_run(config):  # peft freezes all but the adapters and the head
        yield Progress(0, 0, f"Adding {config.scope.upper()} adapters (rank {config.lora_r})")
        model = add_adapters(model, config, tuple(cfg["input_size"][1:]))
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    else:
        trainable = freeze(model, config)
    mixup, criterion = loss_fns(config, split)
    criterion = criterion.to(base.device)
    loaders = yield from make_loaders(split, cfg, config, base.device, dist_info, generator,
                                      drop_last=mixup is not None, cancel=cancel)
    optimizer = make_optimizer(model, config, base.device)
    steps_per_epoch = math.ceil(loaders.steps / config.grad_accum)
    scheduler = make_scheduler(optimizer, config, steps_per_epoch)
    run = _Run(config, out, dist_info, split, base, model, model, cfg, loaders, optimizer, scheduler,
               steps_per_epoch, timm.utils.ModelEmaV3(model, decay=config.ema_decay) if config.ema_decay else None,
               torch.amp.GradScaler("cuda") if base.precision == "fp16" and base.device.type == "cuda" else None,
               mixup, criterion, trainable)
    run.skipped, run.ignored, run.generator = {**skipped, **loaders.failed}, ignored, generator
    run.text, run.head_note = text, head_note
    run.warnings.extend(data_warnings)
    if resume:
        restore_checkpoint(run, checkpoint)
    if dist_info.main:  # on resume too: the recorded settings name this folder, even for a renamed run
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out / "train_config.json", config.to_json().encode())
        if not resume:
            atomic_write_bytes(out / "split.json", json.dumps(split.to_manifest(), indent=1).encode())
    if dist_info.main:
        write_status(run, "running", run.start_epoch)
        die_at("before-first-checkpoint")
    barrier(dist_info)  # the run folder exists before anyone goes on
    run.train_model = _wrap_for_training(model, config, dist_info, base.device)
    return run


def _prepare_model(base: LoadedModel, config: TrainConfig, classes: list[str],
                   text: TextInit | None) -> tuple[nn.Module, dict, str]:
    """The base model with a new head, drop path, the run's input size and memory format; its data config and
    how the head was initialised."""
    model = base.model
    head_note = new_head(model, classes, base.labels, config.seed, config.reuse_head, text)
    if config.drop_path:
        set_drop_path(model, config.drop_path)
    if config.grad_checkpointing:
        set_grad_checkpointing(model)
    cfg = data_config_for(base, config)
    if tuple(cfg["input_size"][1:]) != base.input_hw and hasattr(model, "set_input_size"):
        model.set_input_size(img_size=cfg["input_size"][1:])
    model.to(base.device)
    if config.channels_last:
        model.to(memory_format=torch.channels_last)
    return model, cfg, head_note


def _wrap_for_training(model: nn.Module, config: TrainConfig, dist_info: DistInfo, device) -> nn.Module:
    if dist_info.enabled:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    return torch.compile(model) if config.compile else model


def _train_epochs(run: _Run, cancel: CancelToken):
    """Epochs from `run.start_epoch`: train, validate, save the best model, log, checkpoint, probe, early stop.
    Returns (status, epochs done)."""
    config, main = run.config, run.dist_info.main
    # on resume, rows of epochs after the checkpoint (logged, then killed before the checkpoint) are dropped
    log = MetricsLog(run.out, keep_epochs=run.start_epoch) if main else None
    # attention over training is a rollout: none for models without global attention (Swin)
    probe = probe_image(config, run.split) if main and why_not(run.base.model, "rollout") is None else None
    status, done = "finished", run.start_epoch  # done: epochs whose checkpoint is written
    try:
        for epoch in range(run.start_epoch, config.epochs):
            loss_sum, correct, seen, seconds = yield from _train_one_epoch(run, epoch, cancel)
            run.scheduler.step(epoch + 1)
            loss_sum, correct, seen = sum_across(run.dist_info, loss_sum, correct, seen)
            began = time.monotonic()
            val_loss, val_acc = validation_pass(run.eval_model, run.loaders.val, run.base.autocast, run.dist_info)
            run.clock.validated(time.monotonic() - began)
            improved = _record_validation(run, epoch, val_loss, val_acc)
            row = dict(epoch=epoch, train_loss=loss_sum / max(1, seen), train_acc=correct / max(1, seen),
                       val_loss=val_loss, val_acc=val_acc, lr=run.optimizer.param_groups[-1]["lr"], seconds=seconds)
            with deferred_interrupt():  # Ctrl+C lands before or after this epoch's records, never between them
                if main:
                    if improved:
                        _save_best(run, epoch)
                    log.log(row)
                    die_at("after-metrics-row")
                    save_checkpoint(run, epoch)
                    die_at("after-checkpoint")
                done = epoch + 1
            yield EpochMetrics(**row, best=improved)
            warning = chance_warning(run, epoch, len(run.split.classes))
            if warning is not None:
                yield warning
            if probe is not None:
                snapshot = probe_snapshot(unwrap(run.eval_model), probe, run.cfg, run.base, epoch)
                save_snapshot(run.out, snapshot)  # History replays it for any run, later
                yield snapshot
            if broadcast_flag(run.dist_info, bool(config.patience) and run.stale >= config.patience):
                status = "early-stopped"
                break
    except Cancelled:
        status = "cancelled"  # the checkpoint of the last finished epoch stays: `resume` continues from it
    except KeyboardInterrupt:  # Ctrl+C in the CLI: the same as a cancel, so status.json says what happened
        status = "interrupted"
    except Exception:  # e.g. the model folder could not be written: the run failed, it is not still "running"
        if main:
            with contextlib.suppress(OSError):  # a full disk may refuse this too: the run then reads as killed
                write_status(run, "failed", done)
        raise
    finally:
        if log is not None:
            log.close()
    # a kill between an epoch's metrics row and its checkpoint leaves that row until the run is resumed, which
    # drops it (MetricsLog keeps only the checkpointed epochs) and trains the epoch again
    return status, done


def _save_best(run: _Run, epoch: int) -> None:
    """The run folder's model (adapters merged into it), and for an adapter run the adapter folder beside it."""
    config, classes = run.config, list(run.split.classes)
    provenance = {"base_model": config.model, "base_weights": run.base.weights_source,
                  "fine_tuned": f"ViT Studio, preset {config.preset}, epoch {epoch + 1}"}
    save_model_folder(merged_copy(run.eval_model), run.out, classes, run.cfg, provenance)
    if is_adapter_run(config):
        local = Path(config.model)  # a base named by path is recorded as an absolute one: the run may be moved
        save_adapter_folder(run.eval_model, run.out, {
            "base_model": str(local.resolve()) if local.exists() else config.model, "base_weights": config.weights,
            "classes": classes, "data_config": {k: v for k, v in run.cfg.items() if k != "hf_size"},
            "fine_tuned": provenance["fine_tuned"]})


def _record_validation(run: _Run, epoch: int, val_loss: float, val_acc: float) -> bool:
    """Whether this epoch's model is the best so far (then it is the one kept): a higher accuracy, or the same one
    with a lower loss (100 % of 8 validation images at epoch 1 tied every later epoch, and epoch 1 was kept)."""
    improved = val_acc > run.best_acc or (val_acc == run.best_acc and val_loss < run.best_loss)
    if improved:
        run.best_acc, run.best_loss, run.best_epoch, run.stale = val_acc, val_loss, epoch, 0
    else:
        run.stale += 1
    return improved


def _train_one_epoch(run: _Run, epoch: int, cancel: CancelToken):
    """One pass over the training shard; yields StepProgress. Returns (loss sum, correct, seen, seconds)."""
    config, loaders, optimizer, scaler = run.config, run.loaders, run.optimizer, run.scaler
    world = run.dist_info.world
    throttle = Throttle(10)
    run.train_model.train()
    started, seen = time.monotonic(), 0
    run.clock.started = run.clock.started or started
    # sums stay on the device: reading them (a GPU sync) once per progress report, not per step, lets the host
    # queue the next steps while the GPU works
    loss_sum = torch.zeros((), dtype=torch.float64, device=run.base.device)
    correct = torch.zeros((), dtype=torch.long, device=run.base.device)
    optimizer.zero_grad(set_to_none=True)
    # closed on any way out (cancel, Ctrl+C, out of memory): a prefetching thread ends now, not when (or if) the
    # generator is collected — a thread still inside a torch kernel at interpreter exit aborts the process
    with contextlib.closing(loaders.train(epoch)) as batches:
        for step, (x, y) in enumerate(batches):
            cancel.raise_if_cancelled()
            cancel.wait_while_paused()
            die_at("train-step")
            if config.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            target = y
            if run.mixup is not None:
                x, target = run.mixup(x, y)
            last = step + 1 == loaders.steps
            update = (step + 1) % config.grad_accum == 0 or last
            # with DDP, gradients of intermediate accumulation steps stay local (no all-reduce until the update)
            sync = contextlib.nullcontext() if update or not run.dist_info.enabled else run.train_model.no_sync()
            with sync, explain_out_of_memory(run.base.device, len(x), "while training on"):
                with run.base.autocast():
                    logits = run.train_model(x)
                    loss = run.criterion(logits.float(), target) / config.grad_accum
                (scaler.scale(loss) if scaler else loss).backward()
            if update:
                if scaler:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                run.scheduler.step_update(epoch * run.steps_per_epoch + (step + 1) // config.grad_accum)
                if run.ema is not None:
                    run.ema.update(run.model)
            seen += len(y)
            loss_sum += loss.detach().double() * (config.grad_accum * len(y))
            correct += (logits.argmax(-1) == y).sum()
            if throttle.ready(force=last):
                now = time.monotonic()
                rate = seen / max(1e-9, now - started) * world
                yield StepProgress(epoch, config.epochs, step + 1, loaders.steps, float(loss_sum) / seen,
                                   optimizer.param_groups[-1]["lr"], rate,
                                   run.clock.eta(now, epoch - run.start_epoch + seen / loaders.images,
                                                 config.epochs - run.start_epoch))
    return float(loss_sum), int(correct), seen, time.monotonic() - started  # the training pass alone
