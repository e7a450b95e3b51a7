"""Writing a model in the upstream WZMIAOMIAO `vit_model.py` format: `model.pth` (a plain state dict with upstream's
key names: `pre_logits.fc.*` for the representation layer, `head.*` for the classifier) and `class_indices.json`
(`{"0": "daisy", ...}`), so upstream's predict.py loads it with `create_model(num_classes=C, has_logits=...)`."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from vitstudio.core.models.checkpoints import SEED_CROP_PCT, representation_size
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


def export_seed(loaded: LoadedModel, folder: str | Path) -> SeedExport:
    from vitstudio.core.train.runs import atomic_write_bytes

    folder = Path(folder)
    state = upstream_state_dict(loaded)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(folder / "model.pth", buffer.getvalue())
    atomic_write_bytes(folder / "class_indices.json", json.dumps(
        {str(i): label for i, label in enumerate(loaded.labels)}, indent=4).encode())
    model = loaded.model
    img = loaded.input_hw[0]
    shape = (img, loaded.patch_size[0], int(model.embed_dim), loaded.depth, loaded.num_heads)
    rep = representation_size(model)
    name = UPSTREAM_CONSTRUCTORS.get(shape)
    if name is not None:
        constructor = f"{name}(num_classes={loaded.num_classes}, has_logits={bool(rep)})"
    else:
        constructor = (f"VisionTransformer(img_size={img}, patch_size={shape[1]}, embed_dim={shape[2]}, "
                       f"depth={shape[3]}, num_heads={shape[4]}, representation_size={rep}, "
                       f"distilled={hasattr(model, 'head_dist')}, num_classes={loaded.num_classes})")
    notes = []
    cfg = loaded.data_config
    if (tuple(cfg["mean"]) != (0.5, 0.5, 0.5) or tuple(cfg["std"]) != (0.5, 0.5, 0.5)
            or abs(float(cfg.get("crop_pct", 1.0)) - SEED_CROP_PCT) > 1e-6 or img != 224):
        notes.append(f"upstream's predict.py preprocesses with Resize(256) → CenterCrop(224), mean = std = 0.5; this "
                     f"model expects {img} px, crop {cfg.get('crop_pct')}, mean {tuple(cfg['mean'])}, std "
                     f"{tuple(cfg['std'])}: change its data_transform to match.")
    return SeedExport(folder, constructor, tuple(notes))
