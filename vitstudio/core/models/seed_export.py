"""Writing a model in the upstream WZMIAOMIAO `vit_model.py` format: `model.pth` (a plain state dict with upstream's
key names: `pre_logits.fc.*` for the representation layer, `head.*` for the classifier) and `class_indices.json`
(`{"0": "daisy", ...}`), so upstream's predict.py loads it with `create_model(num_classes=C, has_logits=...)`."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from vitstudio.core.models.checkpoints import (
    SEED_CROP_PCT,
    SEED_PREPROCESSING,
    SEED_SHAPE_FILE,
    representation_size,
)
from vitstudio.core.models.model import LoadedModel

# upstream vit_model.py's constructors: (img, patch, width, depth, heads) -> name; `_in21k` ones take has_logits
UPSTREAM_CONSTRUCTORS = {
    (224, 16, 768, 12, 12): "vit_base_patch16_224_in21k",
    (224, 32, 768, 12, 12): "vit_base_patch32_224_in21k",
    (224, 16, 1024, 24, 16): "vit_large_patch16_224_in21k",
    (224, 32, 1024, 24, 16): "vit_large_patch32_224_in21k",
    (224, 14, 1280, 32, 16): "vit_huge_patch14_224_in21k",
}
_UPSTREAM_BLOCK_KEYS = {"norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
                        "attn.proj.bias", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias",
                        "mlp.fc2.weight", "mlp.fc2.bias"}
_UPSTREAM_TOP_KEYS = {"cls_token", "dist_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias",
                      "norm.weight", "norm.bias", "pre_logits.fc.weight", "pre_logits.fc.bias", "head.weight",
                      "head.bias", "head_dist.weight", "head_dist.bias"}


README = "README.txt"  # how to load the export with upstream's code, beside it


@dataclass(frozen=True)
class SeedExport:
    folder: Path
    constructor: str  # how to build it in upstream's predict.py
    notes: tuple[str, ...]


def upstream_state_dict(loaded: LoadedModel) -> dict[str, torch.Tensor]:
    """The model's weights under upstream's names; a ValueError naming what upstream's ViT cannot hold."""
    state = {}
    for key, value in loaded.model.state_dict().items():
        key = key.replace("head.fc.", "pre_logits.fc.").replace("head.out.", "head.")
        state[key] = value.detach().cpu().clone()
    unknown = [k for k in state if k not in _UPSTREAM_TOP_KEYS and not (
        k.startswith("blocks.") and k.split(".", 2)[2] in _UPSTREAM_BLOCK_KEYS)]
    model = loaded.model
    pooled_by_token = getattr(model, "cls_token", None) is not None and model.global_pool == "token"
    if unknown or not pooled_by_token:
        what = ", ".join(unknown[:4]) if unknown else "no class token / another pooling"
        raise ValueError(f"{loaded.display_name} cannot be written in upstream's vit_model.py format: upstream's ViT "
                         f"has no place for {what}. Use --format onnx or the timm folder itself.")
    return state


def _num_heads(loaded: LoadedModel) -> int:
    return int(loaded.model.blocks[0].attn.num_heads)


def export_seed(loaded: LoadedModel, folder: str | Path) -> SeedExport:
    """model.pth + class_indices.json in `folder`, and the upstream constructor that loads model.pth strictly (also
    in README.txt, with the notes); a ValueError naming what upstream's VisionTransformer cannot express (nothing is
    written then)."""
    from vitstudio.core.files import atomic_write_bytes

    folder = Path(folder)
    state = upstream_state_dict(loaded)
    constructor, img = upstream_constructor(loaded, state)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(folder / "model.pth", buffer.getvalue())
    atomic_write_bytes(folder / "class_indices.json", json.dumps(
        {str(i): label for i, label in enumerate(loaded.labels)}, indent=4).encode())
    # the seed format stores no head count and upstream ignores this file; ViT Studio reads it back so a model whose
    # heads are not the usual ones for its width (e.g. 2 heads of width 32) loads with its own attention again
    # and its own preprocessing, so that loading the export back predicts as the model did (upstream's predict.py
    # has a data_transform of its own: the note below says what to change in it)
    cfg = loaded.data_config
    preprocessing = {k: (list(cfg[k]) if isinstance(cfg[k], (tuple, list)) else cfg[k])
                     for k in SEED_PREPROCESSING if k in cfg}
    atomic_write_bytes(folder / SEED_SHAPE_FILE, json.dumps(
        {"num_heads": _num_heads(loaded), "preprocessing": preprocessing}).encode())
    notes = []
    if (tuple(cfg["mean"]) != (0.5, 0.5, 0.5) or tuple(cfg["std"]) != (0.5, 0.5, 0.5)
            or abs(float(cfg.get("crop_pct", 1.0)) - SEED_CROP_PCT) > 1e-6 or img != 224):
        notes.append(f"upstream's predict.py preprocesses with Resize(256) → CenterCrop(224), mean = std = 0.5; this "
                     f"model expects {img} px, crop {cfg.get('crop_pct')}, mean {tuple(cfg['mean'])}, std "
                     f"{tuple(cfg['std'])}: change its data_transform to match.")
    # what to do with it, kept with the files (a status line or a terminal cuts it; a folder is copied whole)
    atomic_write_bytes(folder / README, _readme(loaded, constructor, notes).encode())
    return SeedExport(folder, constructor, tuple(notes))


def _readme(loaded: LoadedModel, constructor: str, notes: list[str]) -> str:
    return "\n".join([f"{loaded.display_name}, exported by ViT Studio in the format of upstream's vit_model.py.", "",
                      "In upstream's predict.py, build the model with", "", f"    model = {constructor}", "",
                      "then load model.pth and class_indices.json as it does.", *(["", *notes] if notes else []), ""])


def upstream_constructor(loaded: LoadedModel, state: dict[str, torch.Tensor]) -> tuple[str, int]:
    """(the call that builds this model in upstream's vit_model.py, its img_size). Upstream's VisionTransformer
    takes one int img_size and patch_size (square only), `mlp_ratio` (hidden = int(width * ratio)), `qkv_bias`,
    `representation_size` (dropped when distilled), LayerNorm eps 1e-6 and GELU; anything else is refused by name."""
    model, name = loaded.model, loaded.display_name
    embed = model.patch_embed
    (ph, pw), (gh, gw) = tuple(embed.patch_size), tuple(embed.grid_size)
    h, w = gh * ph, gw * pw

    def refuse(what: str) -> ValueError:
        return ValueError(f"{name} cannot be written in upstream's vit_model.py format: {what}. Use --format onnx or "
                          f"the timm folder itself.")

    if h != w or ph != pw:
        raise refuse(f"it takes {h}×{w} images in {ph}×{pw} patches, and upstream's VisionTransformer has one int "
                     f"img_size and patch_size (square only)")
    width, blocks = int(model.embed_dim), list(model.blocks)
    hidden = {int(b.mlp.fc1.out_features) for b in blocks}
    biased = {f"blocks.{i}.attn.qkv.bias" in state for i in range(len(blocks))}
    if len(hidden) > 1 or len(biased) > 1:
        raise refuse("its blocks differ in MLP width or qkv bias, and upstream builds every block alike")
    norms = [m for b in blocks for m in (b.norm1, b.norm2)] + [model.norm]
    if any(not isinstance(m, nn.LayerNorm) or abs(m.eps - 1e-6) > 1e-12 for m in norms):
        raise refuse("its norms are not LayerNorm(eps=1e-6), upstream's only norm")
    if any(type(b.mlp.act) is not nn.GELU or b.mlp.act.approximate != "none" for b in blocks):
        raise refuse("its MLP activation is not GELU, upstream's only activation")
    distilled = "dist_token" in state
    tokens = 1 + int(distilled)
    if state["pos_embed"].shape[1] != gh * gw + tokens:
        raise refuse("its position embedding leaves out the class token, which upstream's includes")
    missing = [k for k in ("patch_embed.proj.bias", "norm.bias") if k not in state] + [
        f"blocks.{i}.{k}" for i in range(len(blocks)) for k in sorted(_UPSTREAM_BLOCK_KEYS - {"attn.qkv.bias"})
        if f"blocks.{i}.{k}" not in state]
    if missing:
        raise refuse(f"upstream's ViT needs {', '.join(missing[:3])}, which it has not")
    rep = representation_size(model)
    if rep and distilled:
        raise refuse("upstream drops the representation layer of a distilled ViT")
    hidden = hidden.pop()
    ratio = hidden / width if int(width * (hidden / width)) == hidden else (hidden + 0.5) / width
    qkv_bias = biased.pop()
    classes = loaded.num_classes if "head.weight" in state else 0
    named = UPSTREAM_CONSTRUCTORS.get((h, ph, width, len(blocks), loaded.num_heads))
    if named and hidden == 4 * width and qkv_bias and not distilled and rep in (None, width) and classes:
        return f"{named}(num_classes={classes}, has_logits={bool(rep)})", h
    return (f"VisionTransformer(img_size={h}, patch_size={ph}, embed_dim={width}, depth={len(blocks)}, "
            f"num_heads={loaded.num_heads}, mlp_ratio={ratio!r}, qkv_bias={qkv_bias}, representation_size={rep}, "
            f"distilled={distilled}, num_classes={classes})"), h
