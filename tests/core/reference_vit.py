"""Independent references for the attention analyses, written from the published formulas.

`reference_forward` recomputes a timm ViT's forward by hand, materialising softmax(q·kᵀ/√d) for every block
(it reuses the model's parameters and its embedding/MLP sub-modules, not its attention code or our hooks).
The other functions are plain numpy transcriptions of the formulas in the issue.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from vitstudio.core.models.model import LoadedModel


def wrap(model, input_hw, num_classes=None) -> LoadedModel:
    model.eval()
    n = num_classes if num_classes is not None else model.num_classes
    return LoadedModel(model=model, name="test", architecture=type(model).__name__, kind="custom",
                       data_config=dict(input_size=(3, *input_hw), interpolation="bicubic", mean=(0.5,) * 3,
                                        std=(0.5,) * 3, crop_pct=1.0, crop_mode="center"),
                       labels=[f"c{i}" for i in range(n)], label_set="test", weights_source="test",
                       device=torch.device("cpu"), precision="fp32")


def sharpen(model, scale=0.6, seed=0):
    """Random, peaky attention (timm's init gives almost uniform maps, which would hide mistakes)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(torch.randn(p.shape, generator=g) * (scale if "qkv" in name else 0.05))
    return model


def reference_forward(model, x, keep_grad=False):
    """(logits, [A_l (B, H, N, N)], [block outputs (B, N, C)]) by hand."""
    x = model.patch_embed(x)
    x = model._pos_embed(x)
    x = model.norm_pre(x)
    attns, outs = [], []
    for blk in model.blocks:
        h = blk.norm1(x)
        mod = blk.attn
        b, n, c = h.shape
        heads = mod.num_heads
        qkv = (h @ mod.qkv.weight.T + mod.qkv.bias).reshape(b, n, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(c // heads), dim=-1)
        if keep_grad:
            a.retain_grad()
        attns.append(a)
        o = (a @ v).transpose(1, 2).reshape(b, n, c)
        x = x + blk.ls1(mod.proj(o))
        x = x + blk.ls2(blk.mlp(blk.norm2(x)))
        outs.append(x)
    logits = model.forward_head(model.norm(x))
    return logits, attns, outs


def np_attn(attns):
    return [a.detach().double().numpy() for a in attns]


def ref_head_maps(a, prefix, has_cls, grid):
    """a: (B, H, N, N) -> (B, H, gh, gw)."""
    m = a[:, :, 0, prefix:] if has_cls else a[:, :, :, prefix:].mean(axis=2)
    return m.reshape(*m.shape[:2], *grid)


def ref_rollout(attns, prefix, has_cls, grid, fusion="mean", discard=0.0, column_bug=False):
    out = []
    for b in range(attns[0].shape[0]):
        n = attns[0].shape[-1]
        r = np.eye(n)
        for a in attns:
            fused = {"mean": np.mean, "max": np.max, "min": np.min}[fusion](a[b], axis=0).copy()
            k = math.floor(discard * n * n)
            if k:
                flat = fused.reshape(-1)
                order = [i for i in np.argsort(flat, kind="stable") if i != 0][:k]
                flat[order] = 0.0
                fused = flat.reshape(n, n)
            a_hat = fused + np.eye(n)
            if column_bug:  # vit-explain: a / a.sum(dim=-1) broadcasts over columns
                a_hat = a_hat / a_hat.sum(axis=-1)[None, :]
            else:
                a_hat = a_hat / a_hat.sum(axis=-1, keepdims=True)
            r = a_hat @ r
        row = r[0, prefix:] if has_cls else r[:, prefix:].mean(axis=0)
        out.append(row.reshape(grid))
    return np.stack(out)


def ref_gradient_rollout(attns, grads, prefix, has_cls, grid):
    out = []
    for b in range(attns[0].shape[0]):
        n = attns[0].shape[-1]
        r = np.eye(n)
        for a, g in zip(attns, grads):
            cam = np.maximum(g[b] * a[b], 0).mean(axis=0)
            r = r + cam @ r
        row = r[0, prefix:] if has_cls else r[:, prefix:].mean(axis=0)
        out.append(row.reshape(grid))
    return np.stack(out)


def ref_distance_entropy(attns, prefix, grid, patch_px):
    gh, gw = grid
    coords = [(r, c) for r in range(gh) for c in range(gw)]
    dist = np.array([[math.hypot(patch_px[0] * (ri - rj), patch_px[1] * (ci - cj)) for rj, cj in coords]
                     for ri, ci in coords])
    distance, entropy = [], []
    for a in attns:  # (B, H, N, N)
        patches = a[:, :, prefix:, prefix:]
        distance.append((patches * dist).sum(-1).mean(-1).mean(0))
        plogp = np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0)  # 0·log 0 = 0 (underflowed weights)
        entropy.append((-plogp.sum(-1)).mean(-1).mean(0))
    return np.array(distance), np.array(entropy)
