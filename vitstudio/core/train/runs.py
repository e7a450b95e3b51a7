"""A training run's folder: atomic writes of the model (timm hub layout) and checkpoints, metrics, history."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from torch import nn

from vitstudio.core.fields import EPOCH_CURVES, METRIC_FIELDS
from vitstudio.core.files import SafeCsvWriter, atomic_write_bytes, die_at, naming
from vitstudio.core.models.catalog import model_dirs, models_dir
from vitstudio.core.models.checkpoints import PAIR_KEY, pickle_refusal, refused_pickle
from vitstudio.core.train.runlock import RunFileError, is_owned


def one_line(text: object, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_json_object(path: Path) -> dict:
    """A run's JSON file (status.json, split.json, train_config.json) as a dict, or a RunFileError naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RunFileError(f"{path} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise RunFileError(f"{path} is damaged: not valid JSON ({one_line(exc)})") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path} is damaged: it should hold a JSON object, not a {type(data).__name__}")
    return data


def recorded_optimizer(folder: Path) -> str | None:
    """The optimizer a run folder recorded (None when it has no readable train_config.json)."""
    try:
        return read_json_object(folder / "train_config.json").get("opt")
    except RunFileError:
        return None


def read_train_config(folder: Path):
    """The settings a run recorded, for the run in `folder` (wherever it was first written: a renamed or copied
    run is resumed by its own path); a RunFileError naming train_config.json when it is damaged."""
    from vitstudio.core.train.recipes import TrainConfig

    folder = Path(folder)
    path = folder / "train_config.json"
    try:
        config = TrainConfig.from_json(path.read_text(encoding="utf-8"))
        config.out_dir = str(folder)
        config.validate()
    except OSError as exc:
        raise RunFileError(f"{path} cannot be read: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise RunFileError(f"{path} is damaged: {one_line(exc)}") from None
    return config


# what checkpoint-last.pt holds, and the type of each entry
CHECKPOINT_ENTRIES = {"model": dict, "optimizer": dict, "scheduler": dict, "epoch": int, "best_acc": (int, float),
                      "stale": int, "rng": torch.Tensor}


def read_checkpoint(folder: Path) -> dict:
    """checkpoint-last.pt, checked entry by entry; a RunFileError naming it when it is damaged."""
    path = Path(folder) / CHECKPOINT
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, garbage, empty file, pickled objects: all mean "damaged"
        if refused_pickle(exc):  # never torch's own message: it advises loading the file anyway
            raise RunFileError(f"{pickle_refusal(path)} Remove it to train the run from the start.") from None
        raise RunFileError(f"{path} is damaged ({one_line(f'{type(exc).__name__}: {exc}', 120)}); remove it to "
                           f"train the run from the start") from None
    if not isinstance(state, dict):
        raise RunFileError(f"{path} is damaged: it holds a {type(state).__name__}, not a checkpoint")
    for key, kind in CHECKPOINT_ENTRIES.items():
        if key not in state:
            raise RunFileError(f"{path} is damaged: it has no {key!r}")
        if not isinstance(state[key], kind) or isinstance(state[key], bool):
            raise RunFileError(f"{path} is damaged: {key!r} is a {type(state[key]).__name__}")
    if state["epoch"] < 0 or state["stale"] < 0:
        raise RunFileError(f"{path} is damaged: epoch {state['epoch']}, stale {state['stale']}")
    return state


CHECKPOINT = "checkpoint-last.pt"


REPRESENTATION_NOTE = ("The head is the original ViT's pre-logits layer (Linear + Tanh, head.fc) followed by the "
                       "classifier (head.out). Plain timm cannot build it; ViT Studio loads this folder, and "
                       "`vitstudio export RUN --format seed` writes it in the upstream vit_model.py format.")


def save_model_folder(model: nn.Module, folder: Path, classes: list[str], data_config: dict,
                      provenance: dict | None = None) -> None:
    """config.json + model.safetensors as timm's save_for_hf writes them (so `local-dir:` loads them in
    plain timm), with the class names; each file replaced atomically, the two marked as one pair (the same token in
    the config and in the weights' metadata: a folder left with one save's weights and another's config by a kill
    between the two renames is refused by the loader, `checkpoints.pair_problem`).

    config.json also says what the weights really are: no pretrained tag borrowed from the timm entry point,
    the base model they were fine-tuned from under `vitstudio`, and a representation layer (which plain timm
    cannot express) when the model has one."""
    import uuid

    from safetensors.torch import save_file
    from timm.models._hub import save_config_for_hf

    from vitstudio.core.models.checkpoints import representation_size, shared_layer_norm_eps

    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folder))
    try:
        cfg = {k: data_config[k] for k in ("input_size", "interpolation", "mean", "std", "crop_pct", "crop_mode")
               if k in data_config}
        token = uuid.uuid4().hex
        # save_for_hf's two files, the weights with the pair's token in their metadata
        save_file(model.state_dict(), str(staging / "model.safetensors"), metadata={"format": "pt", PAIR_KEY: token})
        save_config_for_hf(model, str(staging / "config.json"), model_config={"label_names": list(classes)},
                           data_config=cfg)
        config = json.loads((staging / "config.json").read_text())
        config.get("pretrained_cfg", {}).pop("tag", None)  # the entry point's default tag is not where these came from
        extra = dict(provenance or {}, **{PAIR_KEY: token})
        if data_config.get("hf_size"):  # a transformers processor's exact resize (plain timm reads crop_pct)
            extra["hf_size"] = data_config["hf_size"]
        eps = shared_layer_norm_eps(model)
        if eps is not None:
            extra["layer_norm_eps"] = eps
        rep = representation_size(model)
        if rep:
            extra.update(representation_size=rep, note=REPRESENTATION_NOTE)
        config["vitstudio"] = extra
        (staging / "config.json").write_text(json.dumps(config, indent=2))
        for name in ("model.safetensors", "config.json"):
            os.chmod(staging / name, 0o644)
            die_at(f"before-rename-{name}")
            os.replace(staging / name, folder / name)
    except OSError as exc:  # a full disk: the file is named (the kernel's message does not)
        raise naming(exc, folder / "model.safetensors") from None
    except SafetensorError as exc:  # safetensors' own writer: "I/O error: No space left on device (os error 28)"
        raise OSError(*system_error(exc), str(folder / "model.safetensors")) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    atomic_write_bytes(folder / "class_indices.json",
                       json.dumps({str(i): c for i, c in enumerate(classes)}, indent=4).encode())


def system_error(exc: Exception) -> tuple[int, str]:
    """(errno, its message) of the system error a library's message quotes ("os error 28", "code: 28"), else EIO
    and the message itself."""
    found = re.search(r"os error (\d+)|code: (\d+)", str(exc))
    if found:
        code = int(found.group(1) or found.group(2))
        return code, os.strerror(code)
    return errno.EIO, one_line(exc)


class MetricsLog:
    """metrics.csv (appended per epoch) and TensorBoard scalars when tensorboard is installed.

    `keep_epochs`: rows of epochs 0..keep_epochs-1 are kept (the ones a resumed run's checkpoint covers); any later
    row (logged by a process killed before its checkpoint) is dropped, so every epoch appears exactly once."""

    def __init__(self, folder: Path, keep_epochs: int = 0) -> None:
        self.path = folder / "metrics.csv"
        kept = [r for r in read_metrics(folder) if int(r["epoch"]) < keep_epochs] if keep_epochs else []
        buffer = io.StringIO()
        writer = SafeCsvWriter(buffer)
        writer.writerow(METRIC_FIELDS)
        for row in kept:
            writer.writerow([int(row["epoch"]) if k == "epoch" else row[k] for k in METRIC_FIELDS])
        atomic_write_bytes(self.path, buffer.getvalue().encode())
        self.writer = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(folder / "tensorboard"))
        except ImportError:  # tensorboard is optional
            pass

    def log(self, row: dict) -> None:
        try:
            with self.path.open("a", newline="") as fh:
                SafeCsvWriter(fh).writerow([row[k] for k in METRIC_FIELDS])
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise naming(exc, self.path) from None
        if self.writer is not None:
            for key in EPOCH_CURVES:
                self.writer.add_scalar(key, row[key], row["epoch"])
            self.writer.add_scalar("learning_rate", row["lr"], row["epoch"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def read_metrics(folder: Path) -> list[dict]:
    """The rows of metrics.csv; a row still being appended (no line end yet) is left out; a RunFileError naming the
    file when a row is damaged."""
    path = Path(folder) / "metrics.csv"
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path} cannot be read: {one_line(exc)}") from None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines = lines[:-1]  # written by a process appending right now
    rows = list(csv.DictReader(lines))
    if lines and tuple(rows[0].keys() if rows else next(csv.reader(lines[:1]))) != METRIC_FIELDS:
        raise RunFileError(f"{path} is damaged: its columns should be {','.join(METRIC_FIELDS)}")
    try:
        return [{k: float(v) for k, v in row.items()} for row in rows]
    except (TypeError, ValueError):
        raise RunFileError(f"{path} is damaged: a row that is not numbers") from None


def run_status(folder: Path) -> str:
    """'finished', 'early-stopped', 'cancelled', 'interrupted' or 'failed' from status.json; 'running' while a process
    trains it; 'killed' when it says running but nobody holds its lock; 'incomplete' when it has no status."""
    path = Path(folder) / "status.json"
    try:
        status = str(read_json_object(path).get("status", "?")) if path.exists() else "incomplete"
    except RunFileError:  # resuming it names the damaged file
        status = "incomplete"
    if status == "running" and not is_owned(folder):
        return "killed"
    return status


STOPPED = ("cancelled", "interrupted")  # stopped on request, its files whole: the command says how to continue
# statuses a run can be resumed (or restarted) from
UNFINISHED = (*STOPPED, "killed", "incomplete", "failed")


@dataclass(frozen=True)
class RunSummary:
    folder: Path
    name: str
    epochs: int
    best_val_acc: float | None
    status: str
    base_model: str


def list_runs(folder: Path | None = None) -> list[RunSummary]:
    """Past fine-tuning runs under the models folders (the user's, a source checkout's), newest first."""
    folders = [folder] if folder is not None else model_dirs()
    runs = []
    for run in (run for f in folders if f.is_dir() for run in f.iterdir()):
        config = run / "train_config.json"
        if not config.is_file():
            continue
        try:
            metrics = read_metrics(run)
            base = str(read_json_object(config).get("model", "?"))
        except RunFileError:  # still listed: opening or resuming it says what is damaged
            metrics, base = [], "?"
        runs.append(RunSummary(run, run.name, len(metrics), max((m["val_acc"] for m in metrics), default=None),
                               run_status(run), base))
    return sorted(runs, key=lambda r: r.folder.stat().st_mtime, reverse=True)


def new_run_folder(data_dir: str | Path, preset: str) -> Path:
    """A fresh run folder in the user's models folder, named as the app names runs: DATASET-PRESET-MMDD-HHMM
    (-2, -3, … when that name is taken; a run folder is never reused)."""
    import time

    data = Path(data_dir).resolve()
    stem = f"{data.stem if data.is_file() else data.name}-{preset}-{time.strftime('%m%d-%H%M')}"  # file: labels.csv
    folder, n = models_dir() / stem, 1
    while folder.exists():
        n += 1
        folder = models_dir() / f"{stem}-{n}"
    return folder
