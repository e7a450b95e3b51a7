"""Reading weight files safely and fitting them to timm ViTs, including the WZMIAOMIAO seed format.

Seed checkpoints (`vit_model.py` from the flower_photos recipe) are bare state dicts named like timm's
ViT, optionally with a representation layer `pre_logits.fc` (Linear + Tanh) before `head`, and a
`class_indices.json` `{"0": "daisy", ...}` beside them.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import timm
import torch
from torch import nn

from vitstudio.core.errors import UserFacingError
from vitstudio.core.files import irregular

# The ViT paper's width -> heads table (Ti, S, B, L, H); other widths fall back to 64-dim heads.
HEADS_FOR_WIDTH = {192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16}

# Resize 256 -> CenterCrop 224, bilinear, mean = std = 0.5, as the seed's predict.py does; crop_pct
# 224/256 makes timm's eval transform produce exactly that pipeline.
SEED_CROP_PCT = 224 / 256
SEED_SHAPE_FILE = "vitstudio_seed.json"  # beside an exported seed model.pth: what the state dict cannot say (heads)
# A model folder's config.json and model.safetensors are two renames: each carries the same token (config.json under
# "vitstudio", the weights in their metadata), so a folder whose two files come from different saves is refused.
PAIR_KEY = "vitstudio_pair"


class CheckpointError(UserFacingError):
    """A weights file that cannot be read or does not fit; the message is meant for the user."""


def refused_pickle(exc: BaseException) -> bool:
    """torch.load(weights_only=True) refused a file's pickled objects. Its own message then advises loading the file
    with weights_only=False, the one thing a user must never be told to do with a file that may run code."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:  # timm 1.0.31 raises its own RuntimeError from torch's
        seen.add(id(exc))
        if isinstance(exc, pickle.UnpicklingError) or any(words in str(exc) for words in _REFUSALS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


# torch's refusals and timm's ("weights_only=True blocked loading …", raised from torch's UnpicklingError)
_REFUSALS = ("Weights only load failed", "Unsupported globals", "weights_only=True blocked", "weights_only=False")


def pickle_refusal(path) -> str:
    return (f"{path} contains pickled Python objects besides tensors. ViT Studio only loads plain weights, so that a "
            f"checkpoint can never run code.")


_SIZE_MISMATCH = re.compile(r"size mismatch for (\S+): copying a param with shape torch\.Size\((\[[^\]]*\])\) from "
                            r"checkpoint, the shape in current model is torch\.Size\((\[[^\]]*\])\)")


def load_failure(exc: BaseException) -> str:
    """One line for what went wrong loading weights: torch's state-dict report (a line per tensor, 30+ for a width
    mismatch) counted and one example given; never torch's advice to load a refused pickle anyway."""
    if refused_pickle(exc):
        return "the file contains pickled Python objects besides tensors; ViT Studio only loads plain weights."
    text = str(exc)
    mismatches = _SIZE_MISMATCH.findall(text)
    if mismatches:
        name, saved, built = mismatches[0]
        return (f"the weights do not fit the architecture: {len(mismatches)} tensors differ in shape (e.g. {name} "
                f"is {saved} in the file, {built} in the model the config describes).")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first[:300]}"


def _format_problem(path: Path) -> str | None:
    """Why the file cannot be a weights file, read from its first bytes; None when it may be one. A safetensors file
    starts with its header's length and '{'; a PyTorch checkpoint is a zip archive or a pickle; .npz is a zip."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if len(head) < 9:
        return f"it is {len(head)} bytes long"
    if path.suffix.lower() == ".safetensors":
        return None if head[8:9] == b"{" else "it does not start with a safetensors header"
    if head.startswith(b"PK") or head[:1] == b"\x80":
        return None
    kind = "text" if all(32 <= b < 127 or b in b"\t\r\n" for b in head) else "neither a zip archive nor a pickle"
    return f"it is {kind}, not a safetensors file or a PyTorch checkpoint"


def pair_problem(config: dict, weights: Path | None) -> str | None:
    """Why a model folder's config.json and safetensors weights are not one pair (each names a different save's
    token, or only one names any), None when they are or neither says (a folder from before the tokens, timm's)."""
    if weights is None or weights.suffix != ".safetensors":
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(weights), "pt") as f:  # the header only
            found = (f.metadata() or {}).get(PAIR_KEY)
    except Exception:  # noqa: BLE001 - a damaged file: the load itself says how
        return None
    recorded = (config.get("vitstudio") or {}).get(PAIR_KEY) if isinstance(config.get("vitstudio"), dict) else None
    if found is None and recorded is None or found == recorded:
        return None
    return (f"config.json and {weights.name} in {weights.parent} are not one pair: they were written by two different "
            f"saves (one stopped between its two files?); save, train or export the model again.")


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Plain tensors from .safetensors/.pth/.pt/.bin, unwrapping timm train.py checkpoints (EMA first).

    torch files are read with weights_only=True: a checkpoint is never allowed to run code.
    """
    path = Path(path)
    refused = irregular(path, "weights")
    if refused:
        raise CheckpointError(refused)
    if not path.is_file():
        raise CheckpointError(f"Weights file not found: {path}")
    try:
        problem = _format_problem(path)
    except OSError as exc:
        raise CheckpointError(f"Could not read {path}: {exc.strerror or exc}") from None
    if problem:
        raise CheckpointError(f"{path} is not a weights file: {problem}.")
    try:
        state = timm.models.load_state_dict(str(path), use_ema=True, weights_only=True)
    except Exception as exc:  # pickled objects refused, corrupt zip/pickle/safetensors header, wrong format
        if refused_pickle(exc):
            raise CheckpointError(f"{pickle_refusal(path)} Re-save it as a state dict or .safetensors.") from None
        raise CheckpointError(f"Could not read {path}: {load_failure(exc)}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} does not hold a state dict of tensors.")
    return state


def npz_num_classes(path: str | Path) -> int:
    with np.load(path, allow_pickle=False) as weights:
        return int(weights["head/bias"].shape[-1]) if "head/bias" in weights.files else 0


TIMM_LAYER_NORM_EPS = 1e-6


def shared_layer_norm_eps(model: nn.Module) -> float | None:
    """The one eps of all the model's LayerNorms when it is not timm's ViT default (a converted transformers model
    uses 1e-12): a saved run records it, because timm's JSON arguments cannot."""
    found = {m.eps for m in model.modules() if isinstance(m, nn.LayerNorm)}
    return found.pop() if len(found) == 1 and found != {TIMM_LAYER_NORM_EPS} else None


def set_layer_norm_eps(model: nn.Module, eps: float) -> None:
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.eps = eps


def read_seed_heads(folder: Path) -> int | None:
    """The head count ViT Studio's seed export recorded beside the weights, if any."""
    file = folder / SEED_SHAPE_FILE
    if not file.is_file():
        return None
    try:
        heads = json.loads(file.read_text(encoding="utf-8"))["num_heads"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{file} should be {{\"num_heads\": N}}: {exc}") from None
    if not isinstance(heads, int) or heads < 1:
        raise CheckpointError(f"{file}: num_heads must be a whole number >= 1, not {heads!r}.")
    return heads


SEED_PREPROCESSING = ("crop_pct", "crop_mode", "interpolation", "mean", "std")  # what the export records of it


def read_seed_preprocessing(folder: Path) -> dict:
    """The model's own preprocessing that ViT Studio's seed export recorded beside the weights (crop, mean, std,
    interpolation): upstream's predict.py has its own and ignores the file, but loading the export back must see
    what the model was trained on (a run at crop 1.0 came back at the seed's 0.875 and changed its answers: the
    walk). {} for a file without it (exports before it, or upstream's own folders)."""
    file = folder / SEED_SHAPE_FILE
    if not file.is_file():
        return {}
    try:
        recorded = json.loads(file.read_text(encoding="utf-8")).get("preprocessing", {})
        cfg = {k: recorded[k] for k in SEED_PREPROCESSING if k in recorded}
        if "crop_pct" in cfg and not 0 < float(cfg["crop_pct"]) <= 1:
            raise ValueError(f"crop_pct {cfg['crop_pct']!r} is not in (0, 1]")
        for k in ("mean", "std"):
            if k in cfg:
                cfg[k] = tuple(float(v) for v in cfg[k])
                if len(cfg[k]) != 3 or (k == "std" and min(cfg[k]) <= 0):
                    raise ValueError(f"{k} {cfg[k]!r} is not three numbers (std above 0)")
        return cfg
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{file}: its preprocessing cannot be read: {exc}") from None


def read_class_indices(folder: Path) -> list[str] | None:
    """Class names from the seed recipe's class_indices.json beside a checkpoint, if present."""
    file = folder / "class_indices.json"
    if not file.is_file():
        return None
    try:
        mapping = json.loads(file.read_text(encoding="utf-8"))
        return [str(mapping[str(i)]) for i in range(len(mapping))]
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{file} is not a {{\"0\": \"name\", ...}} mapping: {exc}") from None


@dataclass(frozen=True)
class InferredViT:
    """A plain ViT's hyper-parameters read off a state dict's shapes."""

    img_size: int
    patch_size: int
    embed_dim: int
    depth: int
    num_heads: int
    num_classes: int
    mlp_ratio: float
    qkv_bias: bool
    distilled: bool
    representation_size: int | None

    def timm_kwargs(self) -> dict:
        return dict(img_size=self.img_size, patch_size=self.patch_size, embed_dim=self.embed_dim,
                    depth=self.depth, num_heads=self.num_heads, num_classes=self.num_classes,
                    mlp_ratio=self.mlp_ratio, qkv_bias=self.qkv_bias)


def infer_vit(state: dict[str, torch.Tensor]) -> InferredViT:
    """Architecture of a bare ViT state dict (seed format or timm naming) from its keys and shapes."""
    try:
        proj = state["patch_embed.proj.weight"]  # (D, 3, p, p)
        pos = state["pos_embed"]  # (1, prefix + gh*gw, D)
    except KeyError as exc:
        raise CheckpointError(f"Not a ViT state dict: missing {exc.args[0]!r}.") from None
    embed_dim, patch = int(proj.shape[0]), int(proj.shape[-1])
    distilled = "dist_token" in state
    prefix = int("cls_token" in state) + int(distilled)
    grid = math.isqrt(pos.shape[1] - prefix)
    if grid * grid != pos.shape[1] - prefix:
        raise CheckpointError(f"pos_embed has {pos.shape[1]} tokens: not a square grid plus {prefix} prefix.")
    depth = 1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks."))
    head = state.get("head.weight")
    rep = state.get("pre_logits.fc.weight")
    return InferredViT(
        img_size=grid * patch,
        patch_size=patch,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=HEADS_FOR_WIDTH.get(embed_dim, max(1, embed_dim // 64)),
        num_classes=int(head.shape[0]) if head is not None else 0,
        mlp_ratio=state["blocks.0.mlp.fc1.weight"].shape[0] / embed_dim,
        qkv_bias="blocks.0.attn.qkv.bias" in state,
        distilled=distilled,
        representation_size=int(rep.shape[0]) if rep is not None else None,
    )


def build_inferred(inferred: InferredViT) -> nn.Module:
    """A timm ViT (distilled when the weights have a distillation token) matching `inferred`.

    Built through timm's factory (an entry point with the inferred sizes as overrides), so the model carries
    a pretrained_cfg and its recorded arguments: fine-tuned, it saves as a folder plain timm can rebuild."""
    entry = "deit_base_distilled_patch16_224" if inferred.distilled else "vit_base_patch16_224"
    model = timm.create_model(entry, pretrained=False, **inferred.timm_kwargs())
    if inferred.representation_size:
        attach_representation_head(model, inferred.representation_size)
    return model


def representation_size(model: nn.Module) -> int | None:
    """The size of the original ViT's pre-logits layer when the model has one (see attach_representation_head)."""
    head = getattr(model, "head", None)
    if isinstance(head, nn.Sequential) and hasattr(head, "fc") and hasattr(head, "out"):
        return int(head.fc.out_features)
    return None


def attach_representation_head(model: nn.Module, size: int) -> None:
    """Replace `head` by the original ViT's pre-logits (Linear + Tanh) followed by the classifier."""
    model.head = nn.Sequential(OrderedDict(
        fc=nn.Linear(model.embed_dim, size), act=nn.Tanh(), out=nn.Linear(size, model.num_classes)))


def remap_representation_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """pre_logits.fc.* -> head.fc.*, head.* -> head.out.* (see attach_representation_head)."""
    if "pre_logits.fc.weight" not in state:
        return state
    out = {}
    for key, value in state.items():
        if key.startswith("pre_logits.fc."):
            key = "head.fc." + key[len("pre_logits.fc."):]
        elif key in ("head.weight", "head.bias"):
            key = "head.out." + key.split(".")[1]
        out[key] = value
    return out


def load_into(model: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    """Load `state` into `model` strictly, after timm's own filter (pos-embed resampling, npz naming)."""
    from timm.models.vision_transformer import checkpoint_filter_fn

    has_rep = "pre_logits.fc.weight" in state
    if has_rep and not isinstance(model.head, nn.Sequential):
        attach_representation_head(model, state["pre_logits.fc.weight"].shape[0])
    state = remap_representation_keys(state)
    try:
        state = checkpoint_filter_fn(state, model)
    except Exception as exc:  # timm raises assorted errors on shapes it cannot adapt
        raise CheckpointError(f"{source} does not fit this model: {load_failure(exc)}") from None
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # size mismatches are raised even when strict=False
        raise CheckpointError(f"{source} does not match the architecture: {load_failure(exc)}") from None
    problems = []
    if result.missing_keys:
        problems.append(f"{len(result.missing_keys)} missing (e.g. {', '.join(result.missing_keys[:3])})")
    if result.unexpected_keys:
        problems.append(f"{len(result.unexpected_keys)} unexpected "
                        f"(e.g. {', '.join(result.unexpected_keys[:3])})")
    if problems:
        raise CheckpointError(f"{source} does not match the architecture: keys " + "; ".join(problems) + ".")
