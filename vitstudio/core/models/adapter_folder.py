"""A LoRA/DoRA adapter folder as peft saves it (adapter_config.json + adapter_model.safetensors), loaded as a model:
its base model (named in ViT Studio's note beside it, else in peft's `base_model_name_or_path`) with a classifier
for its classes, the adapter applied by peft and merged. A missing base model is named in the message."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vitstudio.core.models.adapter_checks import (
    ADAPTER_CONFIG,
    AdapterError,
    check_base,
    check_config,
    check_note,
    check_weights,
    read_note,
)
from vitstudio.core.models.structure import replace_classifier

ADAPTER_DIR = "adapter"  # inside a run folder
ADAPTER_INFO = "vitstudio_adapter.json"  # ViT Studio's note: base model, its weights, classes, data config


@dataclass(frozen=True)
class AdapterInfo:
    base_model: str
    base_weights: str | None
    classes: list[str]
    data_config: dict | None


def read_adapter_info(folder: Path) -> AdapterInfo:
    """The folder's notes, checked (`adapter_checks`) with its weights before peft reads any of it."""
    config, note = read_note(folder / ADAPTER_CONFIG, "config"), read_note(folder / ADAPTER_INFO, "note")
    check_config(folder / ADAPTER_CONFIG, config)
    check_note(folder / ADAPTER_INFO, note)
    disagreement = run_faces_disagree(folder.parent) if folder.name == ADAPTER_DIR else None
    if disagreement:
        raise AdapterError(f"{folder} holds the adapter of {disagreement[1]} while the run's merged model in "
                           f"{folder.parent} is {disagreement[0]}: the run stopped while saving its best model; "
                           f"`vitstudio finetune --out {folder.parent} --resume` saves the two again.")
    base = note.get("base_model") or config.get("base_model_name_or_path")
    if not base:
        raise AdapterError(f"{folder} is a peft adapter that does not say which base model it was trained on "
                           f"(no base_model_name_or_path in {ADAPTER_CONFIG}); load the base model and apply it "
                           f"with peft.")
    if not isinstance(base, str):
        raise AdapterError(f"{folder / ADAPTER_CONFIG}: 'base_model_name_or_path' must be a path or a model name.")
    check_base(folder, base)
    check_weights(folder)
    return AdapterInfo(str(base), note.get("base_weights"), list(note.get("classes") or []), note.get("data_config"))


def run_faces_disagree(run: Path) -> tuple[str, str] | None:
    """(the merged model's epoch, the adapter's) when a run folder's two faces were saved at different epochs (the
    merged model is written, then the adapter folder swapped in: a kill between leaves them apart until the run is
    resumed); None when they agree, or when either does not say (not a run, a run from before the note)."""
    try:
        merged = json.loads((run / "config.json").read_text(encoding="utf-8"))["vitstudio"]["fine_tuned"]
        adapter = json.loads((run / ADAPTER_DIR / ADAPTER_INFO).read_text(encoding="utf-8"))["fine_tuned"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    if not (isinstance(merged, str) and isinstance(adapter, str)) or merged == adapter:
        return None
    return merged.rsplit(", ", 1)[-1], adapter.rsplit(", ", 1)[-1]


def load_adapter(folder: Path, load_base: Callable[[str, str | None], dict]) -> tuple[dict, AdapterInfo]:
    """(the base model's parts with the adapter merged into its model, the folder's note); `load_base(spec,
    weights)` loads the base model's parts (core/models/loading.py)."""
    info = read_adapter_info(folder)
    try:
        from peft import PeftModel
    except ImportError:
        raise AdapterError(f"{folder} is a LoRA/DoRA adapter; loading it needs peft: pip install 'vitstudio[lora]' "
                           f"(or pip install peft).") from None
    try:
        parts = load_base(info.base_model, info.base_weights)
    except Exception as exc:  # whatever the base's loader says (offline, missing file), said as this adapter's need
        raise AdapterError(f"{folder} is an adapter for the base model {info.base_model}"
                           f"{f' with weights {info.base_weights}' if info.base_weights else ''}, which could not be "
                           f"loaded: {_first_line(exc)}") from None
    model = parts["model"]
    if info.classes:
        replace_classifier(model, len(info.classes))
    size = (info.data_config or {}).get("input_size")
    if size and tuple(size[1:]) != tuple(parts["data_config"]["input_size"][1:]) and hasattr(model, "set_input_size"):
        model.set_input_size(img_size=tuple(size[1:]))
    try:
        model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise AdapterError(f"The adapter in {folder} does not fit its base model {info.base_model}: "
                           f"{_first_line(exc)}") from None
    if info.classes:
        model.pretrained_cfg = {**dict(getattr(model, "pretrained_cfg", {}) or {}), "label_names": info.classes}
    return {**parts, "model": model}, info


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
