"""A saved model's config checked against this machine before timm builds anything from it (a 100000² input or a
billion-wide layer would otherwise allocate until the process dies)."""

from __future__ import annotations

import timm
import torch

from vitstudio.core.models.catalog import family_of
from vitstudio.core.models.sizing import check_fits, check_vit_args, forward_bytes, guessed_fields


def check_config_size(config: dict, source) -> None:
    """A saved model's config.json, checked before timm builds anything from it: the closed form with the
    architecture's own defaults, then (when that had to guess a field) an exact count on the meta device."""
    architecture = str(config.get("architecture", ""))
    model_args = config.get("model_args") or {}
    hierarchical = family_of(architecture.split(".")[0]) == "swin"
    check_vit_args(model_args, str(source), flat=not hierarchical, architecture=architecture)
    if not hierarchical and guessed_fields(model_args, architecture):
        exact_size_check(architecture, model_args, str(source))


def exact_size_check(architecture: str, model_args: dict, source: str) -> None:
    """Build on the meta device (shapes only, nothing allocated; ~0.2 s) and count what the model would need."""
    try:
        with torch.device("meta"):
            model = timm.create_model(architecture, pretrained=False, **model_args)
    except Exception:  # noqa: BLE001 — the real build reports its own error with the file named
        return
    params = sum(p.numel() for p in model.parameters())
    embed, blocks = getattr(model, "patch_embed", None), getattr(model, "blocks", None)
    try:
        tokens = int(embed.num_patches) + int(getattr(model, "num_prefix_tokens", 1))
        attn, mlp = blocks[0].attn, blocks[0].mlp
        activations = forward_bytes(tokens, int(model.embed_dim), int(attn.num_heads), int(mlp.fc1.out_features))
    except (AttributeError, TypeError, IndexError):
        tokens, activations = 0, 0
    check_fits(4 * params + activations, params, tokens, source)
