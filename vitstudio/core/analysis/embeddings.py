"""Patch-token embeddings: tokens per layer, PCA → RGB, similarity, norms, 2-D projections, pooled features
(the cached folder embeddings built on them are in `core/folder/embedcache.py`).

Returns unnormalised float32 numpy arrays; tokens come from timm's `forward_intermediates`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitstudio.core.analysis.capture import grid_for, resolve_layers
from vitstudio.core.models.devices import explain_out_of_memory, to_device
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import is_class_attention, is_windowed, token_stages


@dataclass(frozen=True)
class LayerTokens:
    layer: int
    patches: np.ndarray  # (B, gh, gw, C) token outputs of block `layer` (before the final norm)
    prefix: np.ndarray  # (B, prefix, C) class / distillation / register tokens


def layer_tokens(loaded: LoadedModel, x: torch.Tensor, layers=None) -> dict[int, LayerTokens]:
    """Token outputs of the requested token layers (all by default): blocks, or Swin's stages (each its own
    grid, halved per stage). CaiT's layers are its self-attention blocks: its class token only exists in the
    class-attention blocks after them, which leave the patch tokens unchanged, so it has no prefix here."""
    model = loaded.model
    chosen = resolve_layers(model, layers, token_stages(model))
    if is_windowed(model):
        return _stage_tokens(loaded, x, chosen)
    gh, gw = grid_for(model, x)
    with_prefix = loaded.num_prefix_tokens > 0 and not is_class_attention(model)
    kwargs = {"return_prefix_tokens": True} if with_prefix else {}  # timm returns bare tensors without prefix
    with loaded.lock, torch.inference_mode(), loaded.autocast():
        out = model.forward_intermediates(x.to(loaded.device), indices=chosen, output_fmt="NLC",
                                          intermediates_only=True, **kwargs)
    result = {}
    for layer, item in zip(chosen, out):
        patches, prefix = item if with_prefix else (item, None)
        b, _, c = patches.shape
        prefix = prefix if prefix is not None else patches.new_zeros(b, 0, c)
        result[layer] = LayerTokens(layer, patches.float().reshape(b, gh, gw, c).cpu().numpy(),
                                    prefix.float().cpu().numpy())
    return result


def _stage_tokens(loaded: LoadedModel, x: torch.Tensor, chosen: list[int]) -> dict[int, LayerTokens]:
    with loaded.lock, torch.inference_mode(), loaded.autocast():
        out = loaded.model.forward_intermediates(x.to(loaded.device), indices=chosen, intermediates_only=True)
    result = {}
    for stage, item in zip(chosen, out):  # (B, C, h, w)
        patches = item.float().permute(0, 2, 3, 1).contiguous()
        result[stage] = LayerTokens(stage, patches.cpu().numpy(), np.zeros((item.shape[0], 0, item.shape[1]),
                                                                          np.float32))
    return result


@dataclass(frozen=True)
class PCABasis:
    """A PCA basis fitted once, to project other images or layers (of the same width) consistently."""

    mean: np.ndarray  # (C,)
    components: np.ndarray  # (k, C), unit rows, sign fixed so each row's largest-|.| loading is positive
    explained_variance: np.ndarray  # (k,)

    def project(self, features: np.ndarray) -> np.ndarray:
        """(..., C) -> (..., k)."""
        if features.shape[-1] != self.mean.shape[0]:
            raise ValueError(f"The basis was fitted on width {self.mean.shape[0]}, not {features.shape[-1]}.")
        return (features - self.mean) @ self.components.T


def fit_pca(features: np.ndarray, k: int = 3) -> PCABasis:
    """PCA of (M, C) features via SVD of the centred data."""
    x = np.asarray(features, dtype=np.float64).reshape(-1, features.shape[-1])
    mean = x.mean(0)
    _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
    k = min(k, vt.shape[0])
    comps = vt[:k]
    signs = np.sign(comps[np.arange(k), np.abs(comps).argmax(1)])
    comps = comps * signs[:, None]
    var = s[:k] ** 2 / max(1, x.shape[0] - 1)
    return PCABasis(mean.astype(np.float32), comps.astype(np.float32), var.astype(np.float32))


def pca_rgb(patches: np.ndarray, basis: PCABasis | None = None) -> tuple[np.ndarray, PCABasis]:
    """(B, gh, gw, C) tokens -> ((B, gh, gw, 3) projections on the first three components, basis).

    Pass `basis` to reuse one fitted earlier (same colours across images and layers of one width).
    """
    basis = basis or fit_pca(patches.reshape(-1, patches.shape[-1]), 3)
    return basis.project(patches).astype(np.float32), basis


def pca_2d(patches: np.ndarray, basis: PCABasis | None = None) -> tuple[np.ndarray, PCABasis]:
    """All tokens (B, gh, gw, C) -> ((B·gh·gw, 2) coordinates on the first two components, basis)."""
    flat = patches.reshape(-1, patches.shape[-1])
    basis = basis or fit_pca(flat, 2)
    return basis.project(flat)[:, :2].astype(np.float32), basis


def at_grid(patch: tuple[int, int], from_grid: tuple[int, int], to_grid: tuple[int, int]) -> tuple[int, int]:
    """The cell of `to_grid` that covers patch (row, col) of `from_grid` (Swin's later stages are coarser)."""
    return patch[0] * to_grid[0] // from_grid[0], patch[1] * to_grid[1] // from_grid[1]


def upsample_to(values: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """(h, w, ...) -> (gh, gw, ...) by repeating cells (nearest), so a coarse stage lines up with the patch grid."""
    h, w = values.shape[:2]
    if (h, w) == tuple(grid):
        return values
    rows = np.arange(grid[0]) * h // grid[0]
    cols = np.arange(grid[1]) * w // grid[1]
    return values[rows][:, cols]


def cosine_similarity_to(patches: np.ndarray, patch: tuple[int, int], grid: tuple[int, int] | None = None
                         ) -> np.ndarray:
    """(B, gh, gw, C) -> (B, gh, gw): cosine similarity of every patch to patch (row, col) of its image;
    `grid` is the grid the patch was picked on when it is not the tokens' own (a Swin stage)."""
    b, gh, gw, _ = patches.shape
    row, col = at_grid(patch, grid, (gh, gw)) if grid else patch
    if not (0 <= row < gh and 0 <= col < gw):
        raise ValueError(f"Patch {patch} is outside the {gh}×{gw} grid.")
    unit = patches / np.maximum(np.linalg.norm(patches, axis=-1, keepdims=True), 1e-12)
    return np.einsum("bhwc,bc->bhw", unit, unit[:, row, col]).astype(np.float32)


def token_norms(tokens: LayerTokens) -> tuple[np.ndarray, np.ndarray]:
    """(patch norms (B, gh, gw), prefix-token norms (B, prefix)): high-norm artifact tokens stand out."""
    return (np.linalg.norm(tokens.patches, axis=-1).astype(np.float32),
            np.linalg.norm(tokens.prefix, axis=-1).astype(np.float32))


def pooled_features(loaded: LoadedModel, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """((B, D) pooled features before the classifier, (B, classes) logits)."""
    model = loaded.model
    with (loaded.lock, torch.inference_mode(), loaded.autocast(),
          explain_out_of_memory(loaded.device, len(x), "while embedding")):
        feats = model.forward_features(to_device(x, loaded.device))
        pooled = model.forward_head(feats, pre_logits=True)
        logits = model.forward_head(feats)
    return pooled.float().cpu().numpy(), logits.float().cpu().numpy()


# -- what the registry's embedding entries compute ----------------------------------------------------------
@dataclass(frozen=True)
class TokenView:
    """What a token view shows of one layer: its map on the patch grid (None with a `message` saying what is
    missing), and what some views add (PCA: its colours as drawn, the 2-D scatter and the basis it fitted; norms:
    the prefix tokens' norms)."""

    map: np.ndarray | None
    message: str = ""
    display: np.ndarray | None = None  # what is drawn when it is not the map itself (PCA colours in [0, 1])
    coords: np.ndarray | None = None  # (N, 2) scatter of the patch tokens
    colors: np.ndarray | None = None  # (N, 3) their colours in [0, 1]
    basis: PCABasis | None = None
    prefix_norms: np.ndarray | None = None


# A token view fn(LayerTokens, params, grid, basis) -> TokenView shows one layer on the model's patch grid `grid` (a
# Swin stage's coarser grid is repeated up to it, so clicks and markers mean the same patch on every layer); the GUI
# calls it directly, explain() through `_explain_view`.
def pca_view(tokens: LayerTokens, params: dict, grid, basis: PCABasis | None = None) -> TokenView:
    from vitstudio.core.analysis.overlays import normalise

    rgb, basis = pca_rgb(tokens.patches, basis)
    coords, _ = pca_2d(tokens.patches, basis)
    colors = normalise(rgb[0]).reshape(-1, 3)
    rgb = upsample_to(rgb[0], grid)
    return TokenView(rgb, display=normalise(rgb), coords=coords, colors=colors, basis=basis)


def similarity_view(tokens: LayerTokens, params: dict, grid, basis: PCABasis | None = None) -> TokenView:
    if params.get("patch") is None:
        return TokenView(None, "Click a patch on the image.")
    return TokenView(upsample_to(cosine_similarity_to(tokens.patches, params["patch"], grid)[0], grid))


def norms_view(tokens: LayerTokens, params: dict, grid, basis: PCABasis | None = None) -> TokenView:
    norms, prefix = token_norms(tokens)
    return TokenView(upsample_to(norms[0], grid), prefix_norms=prefix[0].astype(np.float32))


def _explain_view(view, loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    tokens = layer_tokens(loaded, x, [params["layer"]])[params["layer"]]
    out = view(tokens, params, loaded.grid_size)
    return out.map, ({"prefix_norms": out.prefix_norms} if out.prefix_norms is not None else {})


def explain_pca(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    return _explain_view(pca_view, loaded, x, params)


def explain_similarity(loaded: LoadedModel, x: torch.Tensor, params: dict) -> tuple[np.ndarray, dict]:
    return _explain_view(similarity_view, loaded, x, params)
