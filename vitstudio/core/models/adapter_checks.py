"""An adapter folder's files checked before peft reads them: its two JSON notes (objects, with fields of the right
kind and size), its weights (a safetensors file of finite floating-point tensors; never a pickled `.bin`, which
`torch.load` would unpickle) and its base (a model, not another adapter). Each problem is one line naming the file;
peft itself answers a hostile folder with a traceback, an allocation of the size the note asks for, or, for a
pickle, torch's advice to load it with weights_only=False."""

from __future__ import annotations

import math
from pathlib import Path

from vitstudio.core.errors import UserFacingError
from vitstudio.core.records import read_json_value

WEIGHTS = "adapter_model.safetensors"
PICKLED_WEIGHTS = "adapter_model.bin"
LORA_TYPES = ("LORA",)  # DoRA is peft's LORA with use_dora
MAX_RANK = 4096  # as a run's --lora-r
MAX_SIDE = 4096  # as a run's --img-size: an adapter's input size comes from the run that trained it
MAX_NOTE_BYTES = 8 << 20
ADAPTER_CONFIG = "adapter_config.json"  # what makes a folder a peft adapter


class AdapterError(ValueError, UserFacingError):
    pass


def read_note(path: Path, what: str) -> dict:
    """A JSON object file of the folder ({} when absent), or AdapterError naming it."""
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        value = read_json_value(path, f"an adapter's {what}", f"adapter {what}", MAX_NOTE_BYTES)
    except ValueError as exc:
        raise AdapterError(str(exc)) from None
    if not isinstance(value, dict):
        raise AdapterError(f"{path} is not an adapter {what}: a JSON object is expected, not {type(value).__name__}.")
    return value


def check_config(path: Path, config: dict) -> None:
    """peft's adapter_config.json: a LoRA/DoRA adapter of a sensible rank and a finite scaling."""
    kind, r, alpha = config.get("peft_type", "LORA"), config.get("r", 8), config.get("lora_alpha", 8)
    if kind not in LORA_TYPES:
        raise AdapterError(f"{path}: a {str(kind)[:40]} adapter; ViT Studio loads LoRA and DoRA adapters.")
    if not _whole(r) or not 1 <= r <= MAX_RANK:
        raise AdapterError(f"{path}: 'r' must be a whole number from 1 to {MAX_RANK}, not {str(r)[:40]!r}.")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise AdapterError(f"{path}: 'lora_alpha' must be a finite number, not {str(alpha)[:40]!r}.")


def check_note(path: Path, note: dict) -> None:
    """ViT Studio's vitstudio_adapter.json: names, a class list and a data config of the kinds the loader uses."""
    for key in ("base_model", "base_weights"):
        if note.get(key) is not None and not isinstance(note[key], str):
            raise AdapterError(f"{path}: '{key}' must be a path or a model name, not {type(note[key]).__name__}.")
    classes = note.get("classes")
    if classes is not None and not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
        raise AdapterError(f"{path}: 'classes' must be a list of names.")
    data = note.get("data_config")
    if data is None:
        return
    size = data.get("input_size") if isinstance(data, dict) else None
    if not isinstance(data, dict) or (size is not None and not (
            isinstance(size, list) and len(size) == 3 and all(_whole(v) and 0 < v <= MAX_SIDE for v in size))):
        raise AdapterError(f"{path}: 'data_config' must be an object whose input_size is [3, height, width] of at "
                           f"most {MAX_SIDE} px.")


def is_adapter_folder(path: Path) -> bool:
    return path.is_dir() and (path / ADAPTER_CONFIG).is_file()


def check_base(folder: Path, base: str) -> None:
    """The base is a model: an adapter naming itself or another adapter would load adapters without end."""
    path = Path(base).expanduser()
    try:
        adapter = path.is_dir() and is_adapter_folder(path)
    except OSError:
        return
    if adapter:
        same = " (itself)" if path.resolve() == folder.resolve() else ""
        raise AdapterError(f"{folder} names the adapter folder {base}{same} as its base model; an adapter's base must "
                           f"be a model.")


def check_weights(folder: Path) -> None:
    """adapter_model.safetensors of finite floating-point tensors; a pickled .bin refused unread."""
    path = folder / WEIGHTS
    if not path.is_file():
        if (folder / PICKLED_WEIGHTS).exists():
            raise AdapterError(f"{folder / PICKLED_WEIGHTS} holds pickled weights, which can run code when loaded; "
                               f"ViT Studio loads adapters saved as {WEIGHTS} (peft's save_pretrained writes it).")
        raise AdapterError(f"{folder} has no {WEIGHTS}: an adapter folder holds its config and its weights.")
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise AdapterError(f"{path} is not a safetensors file ViT Studio can read "
                           f"({str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}).") from None
    for name, tensor in tensors.items():
        if not tensor.is_floating_point():
            raise AdapterError(f"{path}: {name} holds {str(tensor.dtype).removeprefix('torch.')} values; an "
                               f"adapter's weights are floating-point numbers.")
        if not bool(tensor.isfinite().all()):
            raise AdapterError(f"{path}: {name} holds values that are not finite numbers.")


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
