"""What a run folder says about its own weights, read when it is loaded as a model: a run that did not finish
(failed on a full disk, cancelled, interrupted, killed, still training) holds the weights of its best epoch so far,
and the user is told so wherever it is loaded (the model card, `predict`, the window's log) instead of being given
them as if the run had finished.

Reads status.json itself (the training engine writes it, `core/train/run_folder.py`): the models layer sits below
training and cannot ask it."""

from __future__ import annotations

import json
from pathlib import Path

from vitstudio.core.files import counted
from vitstudio.core.models.adapter_folder import ADAPTER_DIR, run_faces_disagree

FINISHED = ("finished", "early-stopped")


def unfinished_run_note(folder: Path | None) -> str:
    """A sentence when `folder` is a run that did not finish, else ''."""
    if folder is None:
        return ""
    path = Path(folder) / "status.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ""  # not a run folder (a model folder, a download)
    except (OSError, ValueError):
        return f"{path} cannot be read: whether the run {folder.name} finished is unknown."
    status = record.get("status") if isinstance(record, dict) else None
    if status in FINISHED:
        return ""
    apart = run_faces_disagree(Path(folder))
    adapter = (f" Its {ADAPTER_DIR}/ folder holds the adapter of {apart[1]}, not of this model's {apart[0]}, until "
               f"then." if apart else "")
    epochs = record.get("epochs_done") if isinstance(record, dict) else None
    done = f" after {counted(epochs, 'epoch')}" if isinstance(epochs, int) else ""
    state = ("is still training, or was stopped without a word" if status == "running" else
             f"did not finish ({status}{done})")
    return (f"The run {folder.name} {state}: these are the weights of its best epoch so far. Continue it with "
            f"`vitstudio finetune --out {folder} --resume` or Resume run in the Training tab's History.{adapter}")


def base_model(folder: Path | None) -> str | None:
    """The model a run folder was fine-tuned from (its train_config.json's `model`), or None for anything else: the
    default "before" beside a run's "after" when two models are compared."""
    if folder is None:
        return None
    try:
        record = json.loads((Path(folder) / "train_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    base = record.get("model") if isinstance(record, dict) else None
    return base if isinstance(base, str) and base else None
