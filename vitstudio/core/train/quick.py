"""The `quick` preset (data path `features`): a new linear head fitted in seconds on the base model's pooled
features, taken from the folder-embedding cache (core/folder/embedcache.py: computed once, batched, reused by the
Folder tab and by every later quick run on the same images), with the backbone untouched.

The result is an ordinary run folder: the same split rules and split.json, metrics.csv with one row per
full-batch step (each step sees every training feature once: an epoch of the other presets), the model in timm's
layout, eval.json, the out-of-distribution bank, the probe, status.json and a checkpoint that marks the fit done.
`engine.fine_tune` hands a run here when its data path is `features`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.distributed import DistInfo, device_for
from vitstudio.core.files import atomic_torch_save, atomic_write_bytes
from vitstudio.core.folder.embedcache import embed_folder
from vitstudio.core.jobs import Cancelled, CancelToken, Progress
from vitstudio.core.models import ood
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.train.evaluation import EvalReport, Misclassified, confusion_from
from vitstudio.core.train.head_fit import LinearHead, fit_linear_head
from vitstudio.core.train.model_prep import data_config_for, new_head
from vitstudio.core.train.ood_fit import describe_images
from vitstudio.core.train.ood_separation import measure_separation
from vitstudio.core.train.probe import probe_image, probe_snapshot, save_snapshot
from vitstudio.core.train.recipes import TrainConfig
from vitstudio.core.train.records import EpochMetrics, RunWarning, TrainResult
from vitstudio.core.train.run_folder import clear_unfinished, write_status
from vitstudio.core.train.runs import CHECKPOINT, MetricsLog, read_json_object, save_model_folder
from vitstudio.core.train.text_head import HeadStart, TextInit, start_from_text, write_head_start
from vitstudio.core.train.training_data import prepare_split


def quick_run(config: TrainConfig, cancel: CancelToken, resume: bool, out: Path, dist_info: DistInfo):
    """Generator (as `engine._fine_tune`): yields Progress, EpochMetrics (one per step), RunWarning, ProbeSnapshot;
    returns a TrainResult. A finished quick run has nothing to resume; an unfinished one is fitted again (its
    features come from the cache)."""
    if dist_info.enabled:
        raise ValueError("The quick preset fits a head on cached features in one process; run it without torchrun.")
    if resume:
        status = read_json_object(out / "status.json") if (out / "status.json").is_file() else {}
        if status.get("status") == "finished":
            yield RunWarning(f"{out.name} is a finished quick run: its head was fitted in one go, so there is nothing "
                             f"to resume.")
            return TrainResult(out, "finished", int(status.get("epochs_done", 0)),
                               float(status.get("best_val_acc", -1.0)), None, dict(status.get("skipped", {})),
                               int(status.get("best_epoch", -1)), dict(status.get("ignored", {})), last_kept=True)
        _start_over(out)  # killed while it wrote its results: fitting again takes seconds
    run = yield from _prepare(config, cancel, out)
    status, steps_done = "finished", 0
    try:
        head, steps_done = yield from _fit(run, cancel)
        report = yield from _write_results(run, head, steps_done)
    except Cancelled:
        status, report = "cancelled", None
    except KeyboardInterrupt:
        write_status(run, "interrupted", steps_done)
        raise
    except Exception:
        write_status(run, "failed", steps_done)
        raise
    write_status(run, status, steps_done)  # last: "finished" promises everything above is on disk
    return TrainResult(out, status, steps_done, run.best_acc, report, dict(run.skipped), best_epoch=steps_done - 1,
                       ignored=dict(run.ignored), last_kept=True)


def _start_over(out: Path) -> None:
    for name in (CHECKPOINT, "eval.json", ood.BANK_FILE):
        (out / name).unlink(missing_ok=True)
    clear_unfinished(out)


def _check_model(base: LoadedModel, config: TrainConfig) -> None:
    """The cached features are those of the model's own preprocessing and one linear classifier reads them."""
    if data_config_for(base, config) != dict(base.data_config):
        raise ValueError("The quick preset trains on the model's cached features, computed with its own "
                         "preprocessing: leave image size, mean, std, interpolation and crop at the model's.")
    if isinstance(getattr(base.model, "head_dist", None), nn.Linear):
        raise ValueError(f"{base.display_name} has a distillation head; the quick preset fits one linear head "
                         f"(use linear-probe).")
    if not hasattr(base.model, "forward_head"):
        raise ValueError(f"{base.display_name} has no timm forward_head; the quick preset needs its pooled features.")


def _prepare(config: TrainConfig, cancel: CancelToken, out: Path):
    """The split (same rules as every preset), the base model, the features of every file of the split; the run
    folder's settings written. Returns the run record."""
    yield Progress(0, 0, "Scanning the dataset")
    split, skipped, ignored, warnings = prepare_split(config, out)
    for warning in warnings:
        yield RunWarning(warning)
    if not split.val:
        raise ValueError("The validation split is empty.")
    yield Progress(0, 0, f"Loading {config.model}")
    base = load_model(config.model, config.weights, device_for(DistInfo(), config.device), config.precision)
    _check_model(base, config)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "train_config.json", config.to_json().encode())
    atomic_write_bytes(out / "split.json", json.dumps(split.to_manifest(), indent=1).encode())
    run = SimpleNamespace(config=config, out=out, split=split, base=base, best_acc=-1.0, warnings=list(warnings),
                          skipped=dict(skipped), ignored=dict(ignored), dist_info=DistInfo(),
                          loaders=SimpleNamespace(failed={}))
    write_status(run, "running", 0)
    paths = [str(p) for p, _ in split.train + split.val]
    embedded = yield from embed_folder(base, paths, config.batch_size, cancel)  # cached: the Folder tab's too
    run.skipped.update(dict(embedded.errors))
    row_of = {p: i for i, p in enumerate(embedded.paths)}
    pooled = embedded.features_of()  # (N, D): the OOD bank's space
    features = classifier_input(base.model, pooled)  # (N, D'): what the new head will read
    for side in ("train", "val"):
        kept = [(row_of[str(p)], label, p) for p, label in getattr(split, side) if str(p) in row_of]
        rows = [r for r, _, _ in kept]
        setattr(run, f"{side}_x", features[rows])
        setattr(run, f"{side}_pooled", pooled[rows])
        setattr(run, f"{side}_y", np.asarray([label for _, label, _ in kept], np.int64))
        setattr(run, f"{side}_paths", [str(p) for _, _, p in kept])
    yield Progress(len(paths), len(paths), f"Features of {len(paths)} images ({embedded.computed} computed, "
                                           f"{len(embedded.paths) - embedded.computed} from the cache)")
    return run


def classifier_input(model: nn.Module, pooled: np.ndarray) -> np.ndarray:
    """What the final Linear reads: the pooled features, or for a seed model (head = fc, Tanh, out) the pooled
    features through its pre-logits layer."""
    head = getattr(model, "head", None)
    if not (isinstance(head, nn.Sequential) and hasattr(head, "out")):
        return np.asarray(pooled, np.float32)
    pre_logits = nn.Sequential(*[m for name, m in head.named_children() if name != "out"])
    param = next(pre_logits.parameters())
    with torch.inference_mode():
        x = torch.as_tensor(np.asarray(pooled, np.float32), device=param.device, dtype=param.dtype)
        return pre_logits(x).float().cpu().numpy()


def _fit(run, cancel: CancelToken):
    """The new head (initialised as every preset's), fitted full batch; a metrics row and an EpochMetrics per
    step. Returns (the head, steps done)."""
    config, model = run.config, run.base.model
    classes = list(run.split.classes)
    text, why_not_text = start_from_text(run.base, config, classes, torch.as_tensor(run.train_x), [])
    if why_not_text:
        yield RunWarning(why_not_text)
    note = new_head(model, classes, run.base.labels, config.seed, config.reuse_head, text)
    final = _final_linear(model)
    init = (final.weight.detach().float().cpu().numpy(), final.bias.detach().float().cpu().numpy())
    yield _head_start(run, note, text, init)
    yield Progress(0, config.epochs, f"{run.base.display_name}: {note}; fitting it on {len(run.train_y)} cached "
                                     f"features ({config.opt}, L2 {config.weight_decay:g})")
    log, steps = MetricsLog(run.out), 0
    try:
        fit = fit_linear_head(run.train_x, run.train_y, len(classes), run.val_x, run.val_y, l2=config.weight_decay,
                              steps=config.epochs, opt=config.opt, lr=config.lr, balance=config.balance,
                              init=init if text is not None or (config.reuse_head and "base model's rows" in note)
                              else None,
                              cancel=cancel)
        while True:
            try:
                step = next(fit)
            except StopIteration as stop:
                head = stop.value
                break
            row = dict(epoch=step.step, train_loss=step.train_loss, train_acc=step.train_acc,
                       val_loss=step.val_loss, val_acc=step.val_acc, lr=config.lr, seconds=step.seconds)
            log.log(row)
            run.best_acc, run.best_epoch = step.val_acc, step.step  # the head kept is the last step's (head_fit.py)
            steps = step.step + 1
            yield EpochMetrics(**row, best=step.best)
    finally:
        log.close()
    with torch.no_grad():
        final.weight.copy_(torch.as_tensor(head.weight))
        final.bias.copy_(torch.as_tensor(head.bias))
    return head, steps


def _head_start(run, note: str, text: TextInit | None, init: tuple[np.ndarray, np.ndarray]) -> HeadStart:
    """How the head started, written to the run folder; from text, with its validation before any step."""
    start = HeadStart(note)
    if text is not None:
        logits = torch.as_tensor(run.val_x @ init[0].T + init[1], dtype=torch.float64)
        labels = torch.as_tensor(run.val_y)
        loss = float(nn.functional.cross_entropy(logits, labels)) if len(labels) else float("nan")
        accuracy = float((logits.argmax(1) == labels).double().mean()) if len(labels) else float("nan")
        start = HeadStart(note, True, text.templates, loss, accuracy)
    write_head_start(run.out, start)
    return start


def _final_linear(model: nn.Module) -> nn.Linear:
    head = model.head
    return head.out if isinstance(head, nn.Sequential) and hasattr(head, "out") else head


def _write_results(run, head: LinearHead, steps: int):
    """Model folder, probe, checkpoint (the fit is done), eval.json and the OOD bank. Returns the EvalReport."""
    config, classes = run.config, list(run.split.classes)
    yield Progress(0, 0, "Saving the run")
    save_model_folder(run.base.model, run.out, classes, dict(run.base.data_config),
                      {"base_model": config.model, "base_weights": run.base.weights_source,
                       "fine_tuned": f"ViT Studio, preset {config.preset} (a head fitted on cached features, "
                                     f"step {head.step + 1} of {steps})"})
    probe = probe_image(config, run.split)
    if probe is not None:
        if why_not(run.base.model, "rollout") is None:
            snapshot = probe_snapshot(run.base.model, probe, dict(run.base.data_config), run.base, 0)
            save_snapshot(run.out, snapshot)  # the backbone does not change: one snapshot says it all
            yield snapshot
    atomic_torch_save({"model": {k: v.detach().cpu() for k, v in _final_linear(run.base.model).state_dict().items()},
                       "optimizer": {}, "scheduler": {}, "epoch": max(0, steps - 1), "best_acc": run.best_acc,
                       "stale": 0, "rng": torch.get_rng_state()}, run.out / CHECKPOINT)
    report = eval_report(head, run.val_x, run.val_y, run.val_paths, classes,
                         [(str(p), run.skipped[str(p)]) for p, _ in run.split.val if str(p) in run.skipped])
    atomic_write_bytes(run.out / "eval.json", json.dumps(report.to_json(), indent=1).encode())
    yield Progress(0, 0, "Out-of-distribution bank")
    bank = ood.fit_bank(run.train_pooled, run.val_pooled, config.extra.get("data_description")
                        or describe_images(run.train_paths, classes), seed=config.seed)
    # the head does not change the pooled features: the base model scores the outside images as the run would
    separation = yield from measure_separation(run.base, bank, run.val_paths, bank.scores(run.val_pooled), classes,
                                               config.seed)
    ood.save_bank(run.out, dataclasses.replace(bank, separation=separation))
    return report


def eval_report(head: LinearHead, features: np.ndarray, labels: np.ndarray, paths: list[str],
                classes: list[str], skipped: list[tuple[str, str]]) -> EvalReport:
    """The EvalReport of the head on the validation features (what `evaluate` gives on the saved model's forward)."""
    logits = head.logits(features).astype(np.float64)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    predicted = probs.argmax(1) if len(probs) else np.zeros(0, np.int64)
    wrong = tuple(Misclassified(p, int(t), int(k), float(probs[i, k]))
                  for i, (p, t, k) in enumerate(zip(paths, labels, predicted)) if t != k)
    return EvalReport(tuple(classes), confusion_from(classes, labels, predicted), wrong, tuple(skipped))
