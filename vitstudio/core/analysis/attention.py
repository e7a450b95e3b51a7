"""Attention analyses for any timm ViT: head maps, token maps, rollout, gradient rollout, distances.

All functions take a LoadedModel and a preprocessed batch x (B, 3, H, W) and return unnormalised float32
numpy arrays; display scaling is the caller's business. Prefix tokens (class, distillation, registers) are
handled through the model's `num_prefix_tokens`; patch maps are (gh, gw) in row-major patch order.

CaiT runs in two stages: self-attention among the P patch tokens (no class token yet), then class attention
where only the class token attends, to [class, patches]. Rollout, token maps and gradient rollout see both
stages as layers of one (1 + P)-token sequence: a token that takes no part in a layer keeps its value there
(identity row: the class token during self-attention, the patches during class attention). So CaiT's rollout is
R = Â_L ⋯ Â_1 over that sequence, and its class row, R[0, 1:], traces the class token through the class-attention
layers back through the self-attention layers to the input patches. Its self-attention maps are the talking-heads
maps the block applies (head-mixed after the softmax: their rows need not sum to 1, so no entropy is given).
Windowed attention (Swin) is in `window_attention.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from vitstudio.core.analysis.capture import (
    AttentionUnsupported,
    TokenMaps,
    capturing,
    grid_for,
    has_class_token,
    resolve_layers,
)
from vitstudio.core.analysis.registry import FUSIONS
from vitstudio.core.analysis.window_attention import window_token_maps
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import CLASS, PATCHES, WINDOW, is_windowed, trunk_blocks


def _kinds(loaded: LoadedModel) -> list[str]:
    kinds = [t.kind for t in trunk_blocks(loaded.model)]
    if WINDOW in kinds:
        raise AttentionUnsupported("This analysis needs global attention; Swin attends inside windows "
                                   "(see its token maps).")
    return kinds


def sequence_view(a: torch.Tensor, kind: str, keep: float = 1.0) -> torch.Tensor:
    """A CaiT layer's attention (B, H, P, P) or (B, H, 1, 1 + P) as (B, H, 1 + P, 1 + P) over the whole token
    sequence: tokens that take no part get `keep` on the diagonal (1 for attention: they keep their value;
    0 for relevance added by the layer). Global layers are returned as they are."""
    if kind not in (PATCHES, CLASS):
        return a
    b, h, _, n = a.shape
    n = n + 1 if kind == PATCHES else n
    out = torch.eye(n, dtype=a.dtype, device=a.device).mul(keep).expand(b, h, n, n).clone()
    if kind == PATCHES:
        out[:, :, 1:, 1:] = a
    else:
        out[:, :, :1, :] = a
    return out


def head_map_title(loaded: LoadedModel, layer: int) -> str:
    """What a head map of `layer` shows, in words (see `_received`)."""
    kind = trunk_blocks(loaded.model)[layer].kind
    if kind == CLASS:
        return "Class attention (CLS → patches)"
    if kind == PATCHES or not has_class_token(loaded.model):
        return "Mean attention received"
    return "CLS attention"


def _received(a: torch.Tensor, kind: str, p: int, cls: bool) -> torch.Tensor:
    """(B, H, P) the head map of one layer: the class token's attention to the patches; without a class token
    in that layer (global-pool models, CaiT's self-attention), the mean attention each patch receives."""
    if kind == CLASS:
        return a[:, :, 0, 1:]
    if kind == PATCHES:
        return a.float().mean(2)
    return a[:, :, 0, p:] if cls else a[:, :, :, p:].float().mean(2)


def _distance_entropy(a: torch.Tensor, kind: str, p: int, dist: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, H) mean attention distance over patch queries and mean row entropy; NaN where undefined: no patch
    queries (class attention) or rows that are not distributions (talking heads)."""
    a = a.float()
    nan = torch.full(a.shape[:2], float("nan"), device=a.device)
    if kind == CLASS:
        d = nan
    else:
        patches = a if kind == PATCHES else a[:, :, p:, p:]
        d = (patches * dist).sum(-1).mean(-1)
    # decided per head on the device (no host sync per layer): a head whose rows are not all distributions has no
    # entropy
    rows_are_distributions = ((a.sum(-1) - 1).abs() <= 1e-3).all(-1)
    entropy = -(a * torch.log(a.clamp_min(1e-30))).sum(-1).mean(-1)
    return d, torch.where(rows_are_distributions, entropy, nan)


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
    kinds = _kinds(loaded)
    out = {}

    def reduce(layer_idx, a):  # a: (B, H, N, N)
        out["maps"] = _received(a.detach(), kinds[layer_idx], p, cls)

    _forward(loaded, x, resolve_layers(loaded.model, layer), reduce)
    return _patch_grid(loaded, x, out["maps"])


def token_maps(loaded: LoadedModel, x: torch.Tensor, patch: tuple[int, int], layers=None) -> TokenMaps:
    """Attention of patch (row, col) to every patch, and of every patch to it, per layer and head (windowed
    models: inside its window, NaN elsewhere; see `window_attention`)."""
    if is_windowed(loaded.model):
        return window_token_maps(loaded, x, patch, layers)
    gh, gw = grid_for(loaded.model, x)
    row, col = patch
    if not (0 <= row < gh and 0 <= col < gw):
        raise ValueError(f"Patch {patch} is outside the {gh}×{gw} grid.")
    p = loaded.num_prefix_tokens
    q = p + row * gw + col
    rows, cols = {}, {}
    kinds = _kinds(loaded)

    def reduce(layer, a):
        a = sequence_view(a.detach(), kinds[layer])
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
    kinds = _kinds(loaded)

    def accumulate(layer, a):
        _roll(state, sequence_view(a.detach().float(), kinds[layer]), fusion, discard)

    _forward(loaded, x, resolve_layers(loaded.model, None), accumulate)
    return _patch_grid(loaded, x, _cls_row(loaded, state["r"]))


def _roll(state: dict, a: torch.Tensor, fusion: str, discard: float) -> None:
    """One rollout step on state["r"]: fuse heads, discard, add the identity, rows to sum 1, multiply."""
    fused = discard_smallest(fuse_heads(a, fusion), discard)
    a_hat = fused + torch.eye(fused.shape[-1], device=fused.device)
    a_hat = a_hat / a_hat.sum(dim=-1, keepdim=True)
    state["r"] = a_hat if "r" not in state else a_hat @ state["r"]


@dataclass(frozen=True)
class GradientRollout:
    maps: np.ndarray  # (B, gh, gw)
    targets: tuple[int, ...]  # the class explained for each image


def gradient_rollout(loaded: LoadedModel, x: torch.Tensor, target: int | list[int] | None = None
                     ) -> GradientRollout:
    """Chefer et al. (ICCV 2021) generic rule for class c (default: each image's top-1):
    Ā_l = mean_h relu(∂y_c/∂A_l ⊙ A_l); R = I; R ← R + Ā_l·R for l = 1..L; returns R[0, prefix:]."""
    captured: dict[int, torch.Tensor] = {}
    kinds = _kinds(loaded)
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
                                   f"{type(trunk_blocks(loaded.model)[0].block).__name__} blocks do not have that.")
    with torch.no_grad():
        gh, gw = grid_for(loaded.model, x)
        n = loaded.num_prefix_tokens + gh * gw
        r = torch.eye(n, device=logits.device).expand(logits.shape[0], -1, -1).clone()
        for layer, grad in zip(layers, grads):
            cam = (grad.float() * captured[layer].float()).clamp(min=0).mean(1, keepdim=True)  # (B, 1, N, N)
            r = r + sequence_view(cam, kinds[layer], keep=0.0)[:, 0] @ r
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
    kinds = _kinds(loaded)
    per_layer: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def reduce(layer, a):
        d, ent = _distance_entropy(a.detach(), kinds[layer], p, dist)  # (B, H) each
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
    kinds = _kinds(loaded)
    dist = patch_distances((gh, gw), (x.shape[-2] // gh, x.shape[-1] // gw)).to(loaded.device)
    heads, dists, ents, state = {}, {}, {}, {}

    def reduce(layer, a):
        a = a.detach().float()
        heads[layer] = _received(a, kinds[layer], p, cls)[0]
        d, e = _distance_entropy(a, kinds[layer], p, dist)
        dists[layer], ents[layer] = d[0], e[0]
        _roll(state, sequence_view(a, kinds[layer]), fusion, discard)

    layers = resolve_layers(model, None)
    _forward(loaded, x, layers, reduce)

    def stack(d):
        return torch.stack([d[i] for i in layers]).cpu().numpy()

    return AttentionOverview(
        head_maps=stack(heads).reshape(len(layers), -1, gh, gw),
        rollout=_patch_grid(loaded, x, _cls_row(loaded, state["r"]))[0],
        distance=stack(dists), entropy=stack(ents), fusion=fusion, discard=discard)


# -- what the registry's attention entries compute: fn(loaded, x, params) -> (array, extra) -----------------
def explain_heads(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    arr = head_maps(loaded, x, params["layer"])[0]  # (heads, gh, gw)
    return (arr[params["head"]] if params["head"] is not None else arr), {}


def explain_token(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    maps = token_maps(loaded, x, params["patch"], [params["layer"]])
    both = np.stack([maps.attends_to[0, 0], maps.attended_by[0, 0]])  # (2, heads, gh, gw): to, by
    arr = {"to": both[0], "by": both[1], "both": both}[params["direction"]]
    return (arr[..., params["head"], :, :] if params["head"] is not None else arr), {}


def explain_rollout(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    return rollout(loaded, x, params["fusion"], params["discard"])[0], {}


def explain_gradient_rollout(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    result = gradient_rollout(loaded, x, params["target"])
    params.update(target=result.targets[0], target_label=loaded.labels[result.targets[0]])
    return result.maps[0], {}


def explain_distance(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    stats = attention_stats(loaded, x)
    params.update(images=1, unit="input pixels")
    return stats.distance, {"entropy": stats.entropy.astype(np.float32)}
