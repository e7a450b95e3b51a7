"""Checkpoints in Hugging Face transformers' format (ViT, DeiT, DINOv2, BEiT) as timm models, without importing
transformers.

A transformers folder holds `config.json` (with `model_type`, sizes and `id2label`), `model.safetensors` (or
`pytorch_model.bin`) in transformers' key names, and usually `preprocessor_config.json`. We build the matching timm
architecture from the sizes, rename the keys (query/key/value are concatenated into timm's qkv), and reproduce the
image processor exactly (hf_preprocessing: the processor's own resize, floored crop margins). DeiT without a
distillation head (`DeiTForImageClassification`, `DeiTModel`) keeps its distillation token in the sequence as a
timm register token (with a position of its own) and classifies the class token.

DINOv2 (`Dinov2Model`, `Dinov2ForImageClassification`): layer scale (timm's `init_values`), SwiGLU for giant
(timm's packed SwiGLU: gate and up projections stacked), position embeddings stored for 518 px and resampled the way
transformers does at run time (bicubic, no antialias) to the processor's crop size once, at conversion; its
classifier reads [class token, mean of the patch tokens], which `ClsMeanViT` reproduces. DINOv2 with registers puts
its registers after the class token without positions of their own: timm's `no_embed_class` layout, with the class
token's position folded into it. BEiT: q and v biases (its key has none), per-block or shared relative position
bias, layer scale, mean pooling through `fc_norm`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from vitstudio.core.models import hf_preprocessing

SUPPORTED = ("vit", "deit", "dinov2", "dinov2_with_registers", "beit")
DINOV2 = ("dinov2", "dinov2_with_registers")


class TransformersFormatError(ValueError):
    """A transformers checkpoint ViT Studio cannot convert; the message says why."""


def data_config(folder: Path, input_hw: tuple[int, int]) -> dict:
    """The data config reproducing the folder's preprocessor_config.json (or transformers' defaults)."""
    try:
        return hf_preprocessing.data_config(hf_preprocessing.read_processor(folder), input_hw,
                                            str(folder / "preprocessor_config.json"))
    except hf_preprocessing.ProcessorError as exc:
        raise TransformersFormatError(str(exc)) from None


def is_transformers_config(config: dict) -> bool:
    return "model_type" in config and "architecture" not in config


class ClsMeanViT(VisionTransformer):
    """A timm ViT whose classifier reads [class token, mean of the patch tokens] (2·width), as transformers'
    Dinov2ForImageClassification does. Once the classifier is replaced (`reset_classifier`, fine-tuning) it is a
    plain timm ViT again (class-token pooling), so a fine-tuned run loads in plain timm."""

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        if isinstance(self.head, nn.Linear) and self.head.in_features == 2 * self.embed_dim:
            x = self.head_drop(torch.cat([x[:, 0], x[:, self.num_prefix_tokens:].mean(1)], dim=-1))
            return x if pre_logits else self.head(x)
        return super().forward_head(x, pre_logits)


def _sizes(config: dict, source: str) -> dict:
    if config["model_type"] not in SUPPORTED:
        raise TransformersFormatError(f"{source}: transformers model type '{config['model_type']}' is not supported "
                                      f"yet (supported: {', '.join(SUPPORTED)}).")
    if config.get("hidden_act", "gelu") != "gelu":
        raise TransformersFormatError(f"{source}: activation '{config['hidden_act']}' has no timm ViT equivalent.")
    width, heads = int(config.get("hidden_size", 768)), int(config.get("num_attention_heads", 12))
    image = config.get("image_size", 224)
    patch = config.get("patch_size", 16)
    sizes = dict(img_size=image if isinstance(image, int) else tuple(image), patch_size=int(patch), embed_dim=width,
                 depth=int(config.get("num_hidden_layers", 12)), num_heads=heads,
                 mlp_ratio=int(config.get("intermediate_size", 4 * width)) / width,
                 qkv_bias=bool(config.get("qkv_bias", True)))
    if config["model_type"] == "beit":  # timm's Beit: q and v biases, relative position bias, layer scale
        # a scale of 0 means no layer scale: timm's Beit reads init_values=0.0 so (None would be dropped by
        # create_model, leaving the entry point's 0.1)
        scale = float(config.get("layer_scale_init_value", 0.1))
        sizes.update(use_abs_pos_emb=bool(config.get("use_absolute_position_embeddings", False)),
                     use_rel_pos_bias=bool(config.get("use_relative_position_bias", False)),
                     use_shared_rel_pos_bias=bool(config.get("use_shared_relative_position_bias", False)),
                     init_values=scale if scale > 0 else 0.0, qkv_bias=True,
                     global_pool="avg" if config.get("use_mean_pooling", True) else "token")
    if config["model_type"] == "dinov2_with_registers":  # registers after the class token, no position of their own
        sizes.update(reg_tokens=int(config.get("num_register_tokens", 4)), no_embed_class=True)
    if config["model_type"] in DINOV2:
        sizes.update(mlp_ratio=float(config.get("mlp_ratio", 4)), init_values=float(config.get("layerscale_value", 1)))
        if config.get("use_swiglu_ffn"):  # transformers keeps 2/3 of the hidden size, rounded up to 8, per branch
            hidden = (int(int(width * sizes["mlp_ratio"]) * 2 / 3) + 7) // 8 * 8
            sizes.update(mlp_ratio=2 * hidden / width, swiglu=True)
    return sizes


def _rename(state: dict[str, torch.Tensor], depth: int) -> dict[str, torch.Tensor]:
    """transformers' ViT/DeiT names -> timm's; q, k and v are stacked into qkv."""
    state = {re.sub(r"^(vit|deit|dinov2_with_registers|dinov2|beit)\.", "", k): v for k, v in state.items()}
    simple = {
        "embeddings.cls_token": "cls_token", "embeddings.distillation_token": "dist_token",
        "embeddings.position_embeddings": "pos_embed", "embeddings.register_tokens": "reg_token",
        "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
        "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
        "layernorm.weight": "norm.weight", "layernorm.bias": "norm.bias",
        "classifier.weight": "head.weight", "classifier.bias": "head.bias",
        "cls_classifier.weight": "head.weight", "cls_classifier.bias": "head.bias",
        "distillation_classifier.weight": "head_dist.weight", "distillation_classifier.bias": "head_dist.bias",
        # BEiT: mean pooling's norm, and the relative position bias shared by all blocks (BEiT pre-training)
        "pooler.layernorm.weight": "fc_norm.weight", "pooler.layernorm.bias": "fc_norm.bias",
        "encoder.relative_position_bias.relative_position_bias_table": "rel_pos_bias.relative_position_bias_table",
    }
    per_block = {
        "layernorm_before": "norm1", "layernorm_after": "norm2", "attention.output.dense": "attn.proj",
        "intermediate.dense": "mlp.fc1", "output.dense": "mlp.fc2",
        # DINOv2
        "norm1": "norm1", "norm2": "norm2", "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2",
        "mlp.weights_in": "mlp.fc1", "mlp.weights_out": "mlp.fc2", "mlp.down_proj": "mlp.fc2",
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
            glu = [state.get(f"{prefix}mlp.{n}.{kind}") for n in ("gate_proj", "up_proj")]  # timm: act(gate) · up
            if all(p is not None for p in glu):
                out[f"blocks.{i}.mlp.fc1.{kind}"] = torch.cat(glu, dim=0)
        for n in (1, 2):
            if f"{prefix}layer_scale{n}.lambda1" in state:
                out[f"blocks.{i}.ls{n}.gamma"] = state[f"{prefix}layer_scale{n}.lambda1"]
            if f"{prefix}lambda_{n}" in state:  # BEiT's layer scale
                out[f"blocks.{i}.gamma_{n}"] = state[f"{prefix}lambda_{n}"]
        _beit_attention(state, out, prefix, f"blocks.{i}.attn.")
    ignored = {"embeddings.mask_token"} | {k for k in state if k.startswith("pooler.") or
                                          k.endswith("relative_position_index")}
    used = set(simple) | {k for k in state if k.startswith("encoder.layer.")}
    unknown = sorted(k for k in state if k not in used and k not in ignored)
    if unknown:
        raise TransformersFormatError(f"unexpected weights {', '.join(unknown[:4])}")
    return out


def _beit_attention(state: dict, out: dict, prefix: str, target: str) -> None:
    """BEiT's key has no bias: timm keeps q and v biases apart (q_bias, v_bias) beside one qkv weight."""
    attention = f"{prefix}attention.attention."
    if f"{attention}key.bias" in state or f"{attention}query.bias" not in state:
        return  # a ViT/DeiT/DINOv2 block: its qkv bias was concatenated by the caller
    out[f"{target}q_bias"] = state[f"{attention}query.bias"]
    out[f"{target}v_bias"] = state[f"{attention}value.bias"]
    table = f"{attention}relative_position_bias.relative_position_bias_table"
    if table in state:
        out[f"{target}relative_position_bias_table"] = state[table]


def _resample_positions(state: dict, grid: tuple[int, int], antialias: bool) -> None:
    """DINOv2 stores position embeddings for 518 px; transformers resamples them to the input's grid on every
    forward (bicubic, align_corners=False; antialiased for DINOv2 with registers only). Done once here, the same
    way, for the crop size."""
    pos = state.get("pos_embed")
    n = pos.shape[1] - 1 if pos is not None else 0
    side = int(round(n ** 0.5))
    if pos is None or (side, side) == tuple(grid):
        return
    patches = pos[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2).float()
    patches = torch.nn.functional.interpolate(patches, size=tuple(grid), mode="bicubic", align_corners=False,
                                              antialias=antialias)
    state["pos_embed"] = torch.cat([pos[:, :1], patches.permute(0, 2, 3, 1).reshape(1, -1, pos.shape[-1]).to(
        pos.dtype)], dim=1)


def labels_of(config: dict, num_classes: int) -> list[str] | None:
    id2label = config.get("id2label") or {}
    names = [id2label.get(str(i), id2label.get(i)) for i in range(num_classes)]
    return [str(n) for n in names] if num_classes and all(n is not None for n in names) else None


def build(folder: Path) -> tuple[nn.Module, dict, list[str] | None]:
    """(timm model with the checkpoint's weights, data config, labels) for a transformers ViT/DeiT folder."""
    import timm

    from vitstudio.core.models.checkpoints import read_state_dict, set_layer_norm_eps
    from vitstudio.core.models.sizing import check_vit_args

    config = json.loads((folder / "config.json").read_text())
    sizes = _sizes(config, str(folder))
    check_vit_args(sizes, str(folder / "config.json"))
    weights = next((folder / n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).is_file()), None)
    if weights is None:
        raise TransformersFormatError(f"{folder} has a transformers config.json but no model.safetensors.")
    state = _rename(read_state_dict(weights), sizes["depth"])
    num_classes = int(state["head.weight"].shape[0]) if "head.weight" in state else 0
    entry = _entry(config, state, sizes)
    stored = sizes["img_size"] if isinstance(sizes["img_size"], tuple) else (sizes["img_size"],) * 2
    cfg = data_config(folder, stored)
    if config["model_type"] in DINOV2:  # built for the crop size, its position embeddings resampled to it
        sizes["img_size"] = tuple(cfg["input_size"][1:])
        registers = config["model_type"] == "dinov2_with_registers"
        _resample_positions(state, tuple(s // sizes["patch_size"] for s in sizes["img_size"]), antialias=registers)
        if registers:  # timm adds positions to the patches only: the class token's is folded into it
            state["cls_token"] = state["cls_token"] + state["pos_embed"][:, :1]
            state["pos_embed"] = state["pos_embed"][:, 1:]
    model = timm.create_model(entry, pretrained=False, num_classes=num_classes, **sizes)
    if num_classes and state["head.weight"].shape[1] == 2 * sizes["embed_dim"]:  # DINOv2's class + mean head
        model.__class__ = ClsMeanViT
        model.head = nn.Linear(2 * sizes["embed_dim"], num_classes)
    # transformers' LayerNorm eps (1e-12) differs from timm's ViT default (1e-6)
    set_layer_norm_eps(model, float(config.get("layer_norm_eps", 1e-12)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise TransformersFormatError(f"{weights} does not fit a timm {entry}: missing {missing[:3]}, "
                                      f"unexpected {unexpected[:3]}")
    return model, cfg, labels_of(config, num_classes)


def _entry(config: dict, state: dict, sizes: dict) -> str:
    """The timm entry point the converted model is built from (its sizes passed as arguments), so a fine-tuned
    run's config.json names it and plain `timm.create_model(entry, **model_args)` builds it again."""
    if config["model_type"] == "beit":
        return "beit_base_patch16_224"
    if sizes.pop("swiglu", False):  # timm's own DINOv2 giant: packed SwiGLU with SiLU, set by the entry point
        return "vit_giant_patch14_dinov2"  # (a class as an argument is not JSON: the run could not be saved)
    if "dist_token" not in state:
        return "vit_base_patch16_224"
    if "head_dist.weight" in state:
        return "deit_base_distilled_patch16_224"
    # DeiTForImageClassification / DeiTModel: the distillation token is in the sequence ([class, distillation,
    # patches], each with a position) but only the class token is classified: timm's register-token layout
    state["reg_token"] = state.pop("dist_token")
    sizes.update(reg_tokens=1)
    return "vit_base_patch16_224"
