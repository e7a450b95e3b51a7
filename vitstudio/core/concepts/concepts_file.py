"""A concepts file: FILE.safetensors (the SAE's weights, `sae.TopKSAE.state_for_file`) and FILE.json beside it (the
model and block they read, the normalisation, the data, the training, every concept's statistics).

The two are written one after the other, so a kill or a full disk between the renames could leave new weights
beside an old sidecar. The sidecar records the SHA-256 of the weights file it was written with, and the weights'
own metadata says that it has such a sidecar: a reader checks the hash and refuses a pair that does not match
(a legacy pair, from before hashes, has neither). Every tensor and number is checked before any tensor math, so a
damaged or hostile file is one line, never a traceback deep in a forward.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.concepts.sae import DICT, ENC_B, ENC_W, FORMAT, MULT, Concepts, Normalisation, TopKSAE
from vitstudio.core.files import atomic_write_bytes, not_regular, shown_path
from vitstudio.core.records import read_json_value

HASH_KEY = "weights_sha256"  # in FILE.json
PAIRED = "paired"  # in FILE.safetensors' metadata: its sidecar records its hash
MAX_SIDECAR_BYTES = 256 << 20  # every concept's statistics: a few MB at 16k concepts


def weights_path(path: str | Path) -> Path:
    """FILE.safetensors for FILE, FILE.safetensors or FILE.json; a ValueError for a name that names no file ('', '.',
    'folder/': Path('') is '.', whose FILE.safetensors is '..safetensors' in the working folder)."""
    text = str(path)
    if not text.strip() or text.endswith(("/", os.sep)) or Path(text).name in ("", ".", ".."):
        raise ValueError(f"'{shown_path(text)}' names no file: a concepts file is FILE.safetensors with FILE.json "
                         f"beside it (e.g. concepts/digits).")
    p = Path(path)
    return p.with_suffix(".safetensors") if p.suffix in (".json", ".safetensors") else Path(f"{p}.safetensors")


def sidecar_path(path: str | Path) -> Path:
    return weights_path(path).with_suffix(".json")


def writable_target(path: str | Path) -> Path:
    """FILE.safetensors, once FILE names a file and neither of the pair's names holds something that is no regular
    file (a folder named FILE.safetensors): refused in one line before anything is learned."""
    target = weights_path(path)
    for p in (target, sidecar_path(target)):
        what = not_regular(p)
        if what:
            raise ValueError(f"{shown_path(p)} is {what}, not a file: the concepts file FILE.safetensors and its "
                             f"FILE.json cannot be written there; choose another name.")
    return target


def _finite(value):
    """JSON has no NaN: a number that is not finite is written as null (strict readers refuse NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def save_concepts(concepts: Concepts, path: str | Path) -> Path:
    """FILE.safetensors, then FILE.json naming its hash (each written whole)."""
    from safetensors.torch import save

    target = weights_path(path)
    weights = save(concepts.sae.state_for_file(), metadata={"format": FORMAT, PAIRED: HASH_KEY})
    sidecar = dict(format=FORMAT, **concepts.meta, size=concepts.size, k=concepts.sae.k,
                   width=concepts.sae.width, **{HASH_KEY: hashlib.sha256(weights).hexdigest()},
                   normalisation=dict(mean=[float(v) for v in concepts.norm.mean], scale=concepts.norm.scale),
                   concepts=concepts.stats.get("concepts", []),
                   **{k: v for k, v in concepts.stats.items() if k != "concepts"})
    text = json.dumps(_finite(sidecar), indent=1, allow_nan=False).encode()
    atomic_write_bytes(target, weights)
    atomic_write_bytes(sidecar_path(target), text)
    return target


def load_concepts(path: str | Path) -> Concepts:
    """A concepts file, or one ValueError line saying what is wrong with it."""
    target, sidecar = weights_path(path), sidecar_path(path)
    for p in (target, sidecar):
        if not p.is_file():
            raise ValueError(f"{p} does not exist: a concepts file is FILE.safetensors with FILE.json beside it "
                             f"(vitstudio concepts FOLDER --model M --out FILE).")
    meta = read_json_value(sidecar, "a concepts file's sidecar", "concepts sidecar", MAX_SIDECAR_BYTES)
    if not isinstance(meta, dict):
        raise ValueError(f"{sidecar} is not a concepts sidecar: a JSON object is expected, not "
                         f"{type(meta).__name__}.")
    tensors = _read_weights(target, meta)
    try:
        sae, norm = _checked(tensors, meta)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"{target} is not a concepts file ViT Studio can read ({what}).") from None
    stats = {k: meta.pop(k) for k in ("concepts", "classes", "map") if k in meta}
    return Concepts(sae.eval(), norm, meta, stats)


def _read_weights(target: Path, meta: dict) -> dict[str, torch.Tensor]:
    """The weights file's tensors, after its bytes were checked against the hash the sidecar records."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        data = target.read_bytes()  # read once: the bytes hashed are the bytes loaded
        tensors = load(data)
        header = json.loads(data[8:8 + int.from_bytes(data[:8], "little")])  # valid: load() has parsed it
        paired = (header.get("__metadata__") or {}).get(PAIRED)
    except (OSError, SafetensorError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{target} is not a concepts file ViT Studio can read ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:200] if str(exc) else ''}).") from None
    recorded = meta.get(HASH_KEY)
    if (recorded is not None or paired) and recorded != hashlib.sha256(data).hexdigest():
        raise ValueError(f"{target} and {sidecar_path(target).name} are not one pair (the sidecar was written with "
                         f"other weights: a run stopped between writing the two?); learn the concepts again "
                         f"(vitstudio concepts FOLDER --model M --out FILE).")
    return tensors


def _checked(tensors: dict[str, torch.Tensor], meta: dict) -> tuple[TopKSAE, Normalisation]:
    """The SAE and normalisation the file describes; ValueError naming the first tensor or field that is wrong."""
    dictionary = tensors[DICT]
    if dictionary.ndim != 2 or 0 in dictionary.shape:
        raise ValueError(f"{DICT} must be a (concepts, width) matrix, not {list(dictionary.shape)}")
    size, width = dictionary.shape
    for name, shape in ((ENC_W, (size, width)), (ENC_B, (size,)), (MULT, ())):
        tensor = tensors.get(name, torch.zeros(()) if name == MULT else None)
        if tensor is None:
            raise KeyError(name)
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} is {list(tensor.shape)}, where the dictionary ({size} × {width}) needs "
                             f"{list(shape)}")
    for name in (ENC_W, ENC_B, DICT, MULT):
        tensor = tensors.get(name, torch.zeros(()))
        if not tensor.is_floating_point() or not bool(torch.isfinite(tensor.float()).all()):
            raise ValueError(f"{name} holds values that are not finite numbers")
    if not bool(torch.isfinite(dictionary.float() * torch.exp(tensors.get(MULT, torch.zeros(())).float())).all()):
        raise ValueError(f"{MULT} scales the dictionary beyond finite numbers")
    k, layer, grid = meta["k"], meta["layer"], meta["grid"]
    if not _whole(k) or not 0 < k <= size:
        raise ValueError(f"'k' must be a whole number from 1 to {size}, not {json.dumps(k)[:40]}")
    if not _whole(layer) or layer < 0:
        raise ValueError(f"'layer' must be a block number (0 or more), not {json.dumps(layer)[:40]}")
    if not (isinstance(grid, list) and len(grid) == 2 and all(_whole(g) and g > 0 for g in grid)):
        raise ValueError(f"'grid' must be [rows, columns] of the patch grid, not {json.dumps(grid)[:40]}")
    sae = TopKSAE(width, size, k)
    sae.load_from_file(tensors)
    return sae, _normalisation(meta["normalisation"], width)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _normalisation(fields, width: int) -> Normalisation:
    if not isinstance(fields, dict):
        raise TypeError(f"'normalisation' must be an object with mean and scale, not {type(fields).__name__}")
    with np.errstate(over="ignore"):
        mean = np.asarray(fields["mean"], np.float64).astype(np.float32)
    scale = fields["scale"]
    if mean.shape != (width,) or not np.isfinite(mean).all():
        raise ValueError(f"'normalisation.mean' must be {width} finite numbers (the tokens' width)")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 1e-30 < scale < 1e30:
        raise ValueError(f"'normalisation.scale' must be a positive number a float32 holds, not "
                         f"{json.dumps(scale)[:40]}")
    return Normalisation(mean.astype(np.float32), float(scale))
