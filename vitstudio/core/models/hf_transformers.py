"""Checkpoints in Hugging Face transformers' format (ViT, DeiT) as timm models, without importing transformers.

A transformers folder holds `config.json` (with `model_type`, sizes and `id2label`), `model.safetensors` (or
`pytorch_model.bin`) in transformers' key names, and usually `preprocessor_config.json`. We build the matching timm
architecture from the sizes, rename the keys (query/key/value are concatenated into timm's qkv), and express the
image processor as timm's eval transform: transformers resizes to a fixed height×width (no aspect kept), then
centre-crops when asked, which is timm's `crop_mode="squash"` with crop_pct = crop / resize.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from torch import nn

SUPPORTED = ("vit", "deit")
# PIL resample codes used by transformers' image processors
_RESAMPLE = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}


class TransformersFormatError(ValueError):
    """A transformers checkpoint ViT Studio cannot convert; the message says why."""


def is_transformers_config(config: dict) -> bool:
    return "model_type" in config and "architecture" not in config


def _sizes(config: dict, source: str) -> dict:
    if config["model_type"] not in SUPPORTED:
        raise TransformersFormatError(f"{source}: transformers model type '{config['model_type']}' is not supported "
                                      f"yet (supported: {', '.join(SUPPORTED)}).")
    if config.get("hidden_act", "gelu") != "gelu":
        raise TransformersFormatError(f"{source}: activation '{config['hidden_act']}' has no timm ViT equivalent.")
    width, heads = int(config.get("hidden_size", 768)), int(config.get("num_attention_heads", 12))
    image = config.get("image_size", 224)
    patch = config.get("patch_size", 16)
    return dict(img_size=image if isinstance(image, int) else tuple(image), patch_size=int(patch), embed_dim=width,
                depth=int(config.get("num_hidden_layers", 12)), num_heads=heads,
                mlp_ratio=int(config.get("intermediate_size", 4 * width)) / width,
                qkv_bias=bool(config.get("qkv_bias", True)))


def _rename(state: dict[str, torch.Tensor], depth: int) -> dict[str, torch.Tensor]:
    """transformers' ViT/DeiT names -> timm's; q, k and v are stacked into qkv."""
    state = {re.sub(r"^(vit|deit)\.", "", k): v for k, v in state.items()}
    simple = {
        "embeddings.cls_token": "cls_token", "embeddings.distillation_token": "dist_token",
        "embeddings.position_embeddings": "pos_embed",
        "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
        "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
        "layernorm.weight": "norm.weight", "layernorm.bias": "norm.bias",
        "classifier.weight": "head.weight", "classifier.bias": "head.bias",
        "cls_classifier.weight": "head.weight", "cls_classifier.bias": "head.bias",
        "distillation_classifier.weight": "head_dist.weight", "distillation_classifier.bias": "head_dist.bias",
    }
    per_block = {
        "layernorm_before": "norm1", "layernorm_after": "norm2", "attention.output.dense": "attn.proj",
        "intermediate.dense": "mlp.fc1", "output.dense": "mlp.fc2",
    }
    out = {simple[k]: v for k, v in state.items() if k in simple}
    for i in range(depth):
        prefix = f"encoder.layer.{i}."
        for hf, timm_name in per_block.items():
            for kind in ("weight", "bias"):
                if f"{prefix}{hf}.{kind}" in state:
                    out[f"blocks.{i}.{timm_name}.{kind}"] = state[f"{prefix}{hf}.{kind}"]
        for kind in ("weight", "bias"):
            parts = [state.get(f"{prefix}attention.attention.{n}.{kind}") for n in ("query", "key", "value")]
            if all(p is not None for p in parts):
                out[f"blocks.{i}.attn.qkv.{kind}"] = torch.cat(parts, dim=0)
    ignored = {"embeddings.mask_token"} | {k for k in state if k.startswith("pooler.")}
    used = set(simple) | {k for k in state if k.startswith("encoder.layer.")}
    unknown = sorted(k for k in state if k not in used and k not in ignored)
    if unknown:
        raise TransformersFormatError(f"unexpected weights {', '.join(unknown[:4])}")
    return out


def data_config(folder: Path, config: dict, input_hw: tuple[int, int]) -> dict:
    """timm's data config for the folder's preprocessor_config.json (or transformers' defaults)."""
    path = folder / "preprocessor_config.json"
    proc = json.loads(path.read_text()) if path.is_file() else {}
    size = proc.get("size", {"height": input_hw[0], "width": input_hw[1]})
    if isinstance(size, int):
        size = {"height": size, "width": size}
    if "shortest_edge" in size:
        raise TransformersFormatError(f"{path}: shortest-edge resizing is not supported yet.")
    crop = proc.get("crop_size", size) if proc.get("do_center_crop") else size
    if isinstance(crop, int):
        crop = {"height": crop, "width": crop}
    resize = (int(size["height"]), int(size["width"]))
    out = (int(crop["height"]), int(crop["width"]))
    return dict(input_size=(3, *out), interpolation=_RESAMPLE.get(int(proc.get("resample", 2)), "bilinear"),
                mean=tuple(proc.get("image_mean", (0.5, 0.5, 0.5))) if proc.get("do_normalize", True) else (0, 0, 0),
                std=tuple(proc.get("image_std", (0.5, 0.5, 0.5))) if proc.get("do_normalize", True) else (1, 1, 1),
                crop_pct=out[0] / resize[0], crop_mode="squash")


def labels_of(config: dict, num_classes: int) -> list[str] | None:
    id2label = config.get("id2label") or {}
    names = [id2label.get(str(i), id2label.get(i)) for i in range(num_classes)]
    return [str(n) for n in names] if num_classes and all(n is not None for n in names) else None


def build(folder: Path) -> tuple[nn.Module, dict, list[str] | None]:
    """(timm model with the checkpoint's weights, data config, labels) for a transformers ViT/DeiT folder."""
    import timm

    from vitstudio.core.models.checkpoints import read_state_dict
    from vitstudio.core.models.sizing import check_vit_args

    config = json.loads((folder / "config.json").read_text())
    sizes = _sizes(config, str(folder))
    check_vit_args(sizes, str(folder / "config.json"))
    weights = next((folder / n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).is_file()), None)
    if weights is None:
        raise TransformersFormatError(f"{folder} has a transformers config.json but no model.safetensors.")
    state = _rename(read_state_dict(weights), sizes["depth"])
    distilled = "dist_token" in state
    num_classes = int(state["head.weight"].shape[0]) if "head.weight" in state else 0
    entry = "deit_base_distilled_patch16_224" if distilled else "vit_base_patch16_224"
    model = timm.create_model(entry, pretrained=False, num_classes=num_classes, **sizes)
    eps = float(config.get("layer_norm_eps", 1e-12))
    for module in model.modules():  # transformers' LayerNorm eps (1e-12) differs from timm's ViT default (1e-6)
        if isinstance(module, nn.LayerNorm):
            module.eps = eps
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise TransformersFormatError(f"{weights} does not fit a timm {entry}: missing {missing[:3]}, "
                                      f"unexpected {unexpected[:3]}")
    hw = model.patch_embed.img_size
    return model, data_config(folder, config, tuple(hw)), labels_of(config, num_classes)
