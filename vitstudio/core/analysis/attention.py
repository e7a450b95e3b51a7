"""Attention analyses for any timm ViT: head maps, token maps, rollout, gradient rollout, distances.

All functions take a LoadedModel and a preprocessed batch x (B, 3, H, W) and return unnormalised float32
numpy arrays; display scaling is the caller's business. Prefix tokens (class, distillation, registers) are
handled through the model's `num_prefix_tokens`; patch maps are (gh, gw) in row-major patch order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from vitstudio.core.analysis.capture import AttentionUnsupported, capturing, grid_for, has_class_token, resolve_layers
from vitstudio.core.analysis.registry import FUSIONS
from vitstudio.core.models.model import LoadedModel


def _forward(loaded: LoadedModel, x: torch.Tensor, layers: list[int], on_layer, grad: bool = False):
    model = loaded.model
    x = x.to(loaded.device)
    context = torch.enable_grad() if grad else torch.inference_mode()
    with loaded.lock, capturing(model, layers, on_layer), context, loaded.autocast():
        if grad:
            x = x.requires_grad_(True)  # keeps a graph even when the weights are frozen
        return model(x)


def attention_maps(loaded: LoadedModel, x: torch.Tensor, layers=None) -> dict[int, np.ndarray]:
    """{layer: (B, heads, N, N)} post-softmax attention, stored as float16 to halve host memory."""
    out: dict[int, np.ndarray] = {}
    _forward(loaded, x, resolve_layers(loaded.model, layers),
             lambda layer, a: out.__setitem__(layer, a.detach().to("cpu", torch.float16).numpy()))
    return out


def _patch_grid(loaded: LoadedModel, x: torch.Tensor, values: torch.Tensor) -> np.ndarray:
    """(..., P) -> (..., gh, gw) float32 numpy."""
    gh, gw = grid_for(loaded.model, x)
    return values.float().reshape(*values.shape[:-1], gh, gw).cpu().numpy()


def head_maps(loaded: LoadedModel, x: torch.Tensor, layer: int = -1) -> np.ndarray:
    """(B, heads, gh, gw): CLS → patch attention of every head of `layer`.

    Without a class token (global-pool models): the mean attention each patch receives over all queries.
    """
    p = loaded.num_prefix_tokens
    cls = has_class_token(loaded.model)
    out = {}

    def reduce(layer_idx, a):  # a: (B, H, N, N)
        out["maps"] = a[:, :, 0, p:].detach() if cls else a[:, :, :, p:].detach().float().mean(2)

    _forward(loaded, x, resolve_layers(loaded.model, layer), reduce)
    return _patch_grid(loaded, x, out["maps"])


@dataclass(frozen=True)
class TokenMaps:
    layers: tuple[int, ...]
    attends_to: np.ndarray  # (B, layers, heads, gh, gw): attention the chosen patch pays to every patch
    attended_by: np.ndarray  # (B, layers, heads, gh, gw): attention every patch pays to the chosen patch


def token_maps(loaded: LoadedModel, x: torch.Tensor, patch: tuple[int, int], layers=None) -> TokenMaps:
    """Attention of patch (row, col) to every patch, and of every patch to it, per layer and head."""
    gh, gw = grid_for(loaded.model, x)
    row, col = patch
    if not (0 <= row < gh and 0 <= col < gw):
        raise ValueError(f"Patch {patch} is outside the {gh}×{gw} grid.")
    p = loaded.num_prefix_tokens
    q = p + row * gw + col
    rows, cols = {}, {}

    def reduce(layer, a):
        rows[layer] = a[:, :, q, p:].detach()
        cols[layer] = a[:, :, p:, q].detach()

    chosen = resolve_layers(loaded.model, layers)
    _forward(loaded, x, chosen, reduce)
    return TokenMaps(tuple(chosen), _patch_grid(loaded, x, torch.stack([rows[i] for i in chosen], 1)),
                     _patch_grid(loaded, x, torch.stack([cols[i] for i in chosen], 1)))


def fuse_heads(a: torch.Tensor, fusion: str) -> torch.Tensor:
    """(B, H, N, N) -> (B, N, N) by mean, max or min over heads."""
    if fusion == "mean":
        return a.mean(1)
    if fusion == "max":
        return a.amax(1)
    if fusion == "min":
        return a.amin(1)
    raise ValueError(f"Unknown head fusion '{fusion}'; use one of {', '.join(FUSIONS)}.")


def discard_smallest(fused: torch.Tensor, ratio: float) -> torch.Tensor:
    """Zero the ⌊ratio·N²⌋ smallest entries of each image's (N, N) matrix, never the (0, 0) entry."""
    if not 0.0 <= ratio < 1.0:
        raise ValueError("The discard ratio must be in [0, 1).")
    b, n, _ = fused.shape
    k = math.floor(ratio * n * n)
    if k == 0:
        return fused
    flat = fused.reshape(b, n * n).clone()
    candidates = flat.clone()
    candidates[:, 0] = torch.inf  # (0, 0) is never a candidate
    idx = candidates.topk(k, dim=-1, largest=False).indices
    flat.scatter_(1, idx, 0.0)
    return flat.reshape(b, n, n)


def _cls_row(loaded: LoadedModel, r: torch.Tensor) -> torch.Tensor:
    """R[:, 0, prefix:]; without a class token, the mean over all query rows."""
    p = loaded.num_prefix_tokens
    return r[:, 0, p:] if has_class_token(loaded.model) else r[:, :, p:].mean(1)


def rollout(loaded: LoadedModel, x: torch.Tensor, fusion: str = "mean", discard: float = 0.0) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): (B, gh, gw).

    Per layer: fuse heads, discard the smallest entries, add the identity, renormalise each row to sum 1;
    R = Â_L ⋯ Â_1, kept as one running (B, N, N) product while the forward runs.
    """
    if fusion not in FUSIONS:
        raise ValueError(f"Unknown head fusion '{fusion}'; use one of {', '.join(FUSIONS)}.")
    state: dict[str, torch.Tensor] = {}

    def accumulate(layer, a):
        fused = discard_smallest(fuse_heads(a.detach().float(), fusion), discard)
        eye = torch.eye(fused.shape[-1], device=fused.device)
        a_hat = fused + eye
        a_hat = a_hat / a_hat.sum(dim=-1, keepdim=True)  # rows sum to 1
        state["r"] = a_hat if "r" not in state else a_hat @ state["r"]

    _forward(loaded, x, resolve_layers(loaded.model, None), accumulate)
    return _patch_grid(loaded, x, _cls_row(loaded, state["r"]))


@dataclass(frozen=True)
class GradientRollout:
    maps: np.ndarray  # (B, gh, gw)
    targets: tuple[int, ...]  # the class explained for each image


def gradient_rollout(loaded: LoadedModel, x: torch.Tensor, target: int | list[int] | None = None
                     ) -> GradientRollout:
    """Chefer et al. (ICCV 2021) generic rule for class c (default: each image's top-1):
    Ā_l = mean_h relu(∂y_c/∂A_l ⊙ A_l); R = I; R ← R + Ā_l·R for l = 1..L; returns R[0, prefix:]."""
    captured: dict[int, torch.Tensor] = {}
    logits = _forward(loaded, x, resolve_layers(loaded.model, None),
                      lambda layer, a: captured.__setitem__(layer, a), grad=True).float()
    if target is None:
        targets = logits.argmax(-1)
    else:
        targets = torch.as_tensor([target] * len(logits) if isinstance(target, int) else target,
                                  device=logits.device)
        if targets.shape[0] != logits.shape[0] or targets.min() < 0 or targets.max() >= logits.shape[-1]:
            raise ValueError(f"Target class must be in 0..{logits.shape[-1] - 1}, one per image.")
    # images are independent, so one backward of the summed logits gives each image its own gradient
    score = logits.gather(1, targets[:, None]).sum()
    layers = sorted(captured)
    grads = torch.autograd.grad(score, [captured[i] for i in layers], allow_unused=True)
    if any(g is None for g in grads):  # a map assembled after the fact (parallel or differential attention)
        raise AttentionUnsupported("Gradient rollout needs one plain attention module per block; "
                                   f"{type(loaded.model.blocks[0]).__name__} blocks do not have that.")
    with torch.no_grad():
        a0 = captured[layers[0]]
        r = torch.eye(a0.shape[-1], device=a0.device).expand(a0.shape[0], -1, -1).clone()
        for layer, grad in zip(layers, grads):
            cam = (grad.float() * captured[layer].float()).clamp(min=0).mean(1)  # (B, N, N)
            r = r + cam @ r
    return GradientRollout(_patch_grid(loaded, x, _cls_row(loaded, r)), tuple(targets.tolist()))


def patch_distances(grid: tuple[int, int], patch_px: tuple[int, int]) -> torch.Tensor:
    """(P, P) Euclidean distances in input pixels between patch centres (row-major patch order)."""
    gh, gw = grid
    rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    coords = torch.stack([rows.flatten() * patch_px[0], cols.flatten() * patch_px[1]], -1).double()
    return torch.cdist(coords, coords).float()


@dataclass(frozen=True)
class AttentionStats:
    distance: np.ndarray  # (layers, heads): mean attention distance in input pixels
    entropy: np.ndarray  # (layers, heads): mean entropy (nats) of the attention rows
    images: int


def attention_stats(loaded: LoadedModel, x: torch.Tensor) -> AttentionStats:
    """Mean attention distance (ViT paper App. D.7) and entropy per layer and head, averaged over the batch.

    distance = mean over query patches i of Σ_j A[i, j]·d(i, j) over key patches j (prefix rows and
    columns dropped, no renormalisation). entropy = mean over all query rows of −Σ_j A[i, j] log A[i, j].
    """
    sums = attention_stat_sums(loaded, x)
    return AttentionStats(sums[0] / x.shape[0], sums[1] / x.shape[0], x.shape[0])


def attention_stat_sums(loaded: LoadedModel, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(distance, entropy) summed over the images of the batch, each (layers, heads): for folder averages."""
    gh, gw = grid_for(loaded.model, x)
    patch_px = (x.shape[-2] // gh, x.shape[-1] // gw)
    dist = patch_distances((gh, gw), patch_px).to(loaded.device)
    p = loaded.num_prefix_tokens
    per_layer: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def reduce(layer, a):
        a = a.detach().float()
        d = (a[:, :, p:, p:] * dist).sum(-1).mean(-1)  # (B, H)
        ent = -(a * torch.log(a.clamp_min(1e-30))).sum(-1).mean(-1)  # (B, H)
        per_layer[layer] = (d.sum(0), ent.sum(0))

    layers = resolve_layers(loaded.model, None)
    _forward(loaded, x, layers, reduce)
    distance = torch.stack([per_layer[i][0] for i in layers]).cpu().numpy()
    entropy = torch.stack([per_layer[i][1] for i in layers]).cpu().numpy()
    return distance, entropy


@dataclass(frozen=True)
class AttentionOverview:
    """Everything the attention explorer shows for one image, from a single forward pass."""

    head_maps: np.ndarray  # (layers, heads, gh, gw), as head_maps() for every layer
    rollout: np.ndarray  # (gh, gw), as rollout(fusion, discard)
    distance: np.ndarray  # (layers, heads)
    entropy: np.ndarray  # (layers, heads)
    fusion: str
    discard: float


def overview(loaded: LoadedModel, x: torch.Tensor, fusion: str = "mean", discard: float = 0.0) -> AttentionOverview:
    """Head maps of every layer, rollout and distance/entropy for ONE image (x: (1, 3, H, W)) in one forward.

    Each layer's maps are reduced as they arrive, so memory stays at one layer's attention.
    """
    if x.shape[0] != 1:
        raise ValueError("overview() explains one image at a time.")
    if fusion not in FUSIONS:
        raise ValueError(f"Unknown head fusion '{fusion}'; use one of {', '.join(FUSIONS)}.")
    model = loaded.model
    gh, gw = grid_for(model, x)
    p = loaded.num_prefix_tokens
    cls = has_class_token(model)
    dist = patch_distances((gh, gw), (x.shape[-2] // gh, x.shape[-1] // gw)).to(loaded.device)
    heads, dists, ents, state = {}, {}, {}, {}

    def reduce(layer, a):
        a = a.detach().float()
        heads[layer] = a[0, :, 0, p:] if cls else a[0, :, :, p:].mean(1)
        dists[layer] = (a[0, :, p:, p:] * dist).sum(-1).mean(-1)
        ents[layer] = -(a[0] * torch.log(a[0].clamp_min(1e-30))).sum(-1).mean(-1)
        fused = discard_smallest(fuse_heads(a, fusion), discard)
        a_hat = fused + torch.eye(fused.shape[-1], device=fused.device)
        a_hat = a_hat / a_hat.sum(dim=-1, keepdim=True)
        state["r"] = a_hat if "r" not in state else a_hat @ state["r"]

    layers = resolve_layers(model, None)
    _forward(loaded, x, layers, reduce)

    def stack(d):
        return torch.stack([d[i] for i in layers]).cpu().numpy()

    return AttentionOverview(
        head_maps=stack(heads).reshape(len(layers), -1, gh, gw),
        rollout=_patch_grid(loaded, x, _cls_row(loaded, state["r"]))[0],
        distance=stack(dists), entropy=stack(ents), fusion=fusion, discard=discard)
