"""Capturing post-softmax attention from any timm ViT without changing how it predicts.

Fused attention (scaled_dot_product_attention) never materialises the attention matrix. While capturing we
switch `fused_attn` off on the attention modules of the requested blocks only, hook the `attn_drop` module
(whose input is the attention the block applies to v: softmax(q·kᵀ·scale + bias), or for CaiT's talking heads
the head-mixed softmax), and restore everything afterwards. Plain
prediction never goes through here.

Each captured layer is handed to an `on_layer(layer, attn)` callback as soon as its block has run, so
analyses can reduce it at once (rollout keeps one N×N matrix, not L×H of them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vitstudio.core.models.structure import attention_modules, patch_embedding, trunk_blocks


class AttentionUnsupported(Exception):
    """The model's blocks have no attention module we know how to read."""


__all__ = ["AttentionUnsupported", "TokenMaps", "attention_modules", "capturing", "grid_for", "has_class_token",
           "num_layers", "resolve_layers"]


@dataclass(frozen=True)
class TokenMaps:
    layers: tuple[int, ...]
    attends_to: np.ndarray  # (B, layers, heads, gh, gw): attention the chosen patch pays to every patch
    attended_by: np.ndarray  # (B, layers, heads, gh, gw): attention every patch pays to the chosen patch


def num_layers(model: nn.Module) -> int:
    """Attention layers: every trunk block (CaiT: self-attention then class-attention blocks; Swin: all stages)."""
    return len(trunk_blocks(model))


def resolve_layers(model: nn.Module, layers: Iterable[int] | int | None, depth: int | None = None) -> list[int]:
    """0-based layer indices; negative ones count from the end; None means every layer. `depth` defaults to the
    attention layers (embeddings pass their token layers: `structure.token_stages`)."""
    depth = num_layers(model) if depth is None else depth
    if layers is None:
        return list(range(depth))
    if isinstance(layers, int):
        layers = [layers]
    out = []
    for layer in layers:
        if not -depth <= layer < depth:
            raise ValueError(f"Layer {layer} is out of range: the model has {depth} layers (0..{depth - 1}).")
        out.append(layer % depth)
    return sorted(set(out))


def _combine(module: nn.Module, attn: torch.Tensor) -> torch.Tensor:
    """Differential attention (DiffAttention, DiffParallelScalingBlock) feeds 2·heads softmax maps to
    attn_drop and mixes them as a0 − λ·a1 afterwards; we report that mix, the matrix actually applied to v."""
    if hasattr(module, "_compute_lambda"):
        b, h2, n, _ = attn.shape
        lam = module._compute_lambda().type_as(attn)
        attn = attn.view(b, h2 // 2, 2, n, n)
        return attn[:, :, 0] - lam * attn[:, :, 1]
    return attn


@contextlib.contextmanager
def capturing(model: nn.Module, layers: list[int], on_layer: Callable[[int, torch.Tensor], None]) -> Iterator[None]:
    """Within the context, every forward calls on_layer(layer, attn) for each layer asked: (B, heads, N, N) for
    global blocks, (B, heads, P, P) for CaiT's self-attention (no class token there), (B, heads, 1, 1 + P) for its
    class attention and (B·windows, heads, w², w²) for Swin's windows (see `structure.trunk_blocks`)."""
    blocks = [t.block for t in trunk_blocks(model)]
    per_layer = {layer: attention_modules(blocks[layer]) for layer in layers}
    missing = [layer for layer, mods in per_layer.items() if not mods]
    if missing:
        raise AttentionUnsupported(
            f"{type(blocks[missing[0]]).__name__} blocks have no attention module ViT Studio can read.")
    pending: dict[int, list[torch.Tensor]] = {}
    handles, saved = [], []

    def hook_for(layer: int, module: nn.Module):
        def hook(_drop, _inputs, output):
            # attn_drop's output is what the block multiplies with v (identical to its input in eval), so
            # gradients taken with respect to it are ∂y/∂A
            pending.setdefault(layer, []).append(_combine(module, output))
            if len(pending[layer]) == len(per_layer[layer]):
                parts = pending.pop(layer)
                on_layer(layer, parts[0] if len(parts) == 1 else torch.cat(parts, dim=1))
        return hook

    try:
        for layer, modules in per_layer.items():
            for module in modules:
                if hasattr(module, "fused_attn"):  # talking heads / cosine window attention have no fused path
                    saved.append((module, module.fused_attn))
                    module.fused_attn = False
                handles.append(module.attn_drop.register_forward_hook(hook_for(layer, module)))
        yield
    finally:
        for handle in handles:
            handle.remove()
        for module, flag in saved:
            module.fused_attn = flag


def grid_for(model: nn.Module, x: torch.Tensor) -> tuple[int, int]:
    """Patch grid (rows, cols) for input `x` (B, 3, H, W)."""
    embed = patch_embedding(model)
    if hasattr(embed, "dynamic_feat_size"):
        return tuple(embed.dynamic_feat_size(tuple(x.shape[-2:])))
    return tuple(embed.grid_size)


def has_class_token(model: nn.Module) -> bool:
    return getattr(model, "cls_token", None) is not None
