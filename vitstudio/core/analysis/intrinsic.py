"""Model-intrinsic views (ViT paper Fig. 7): position-embedding similarity and patch-embedding filters."""

from __future__ import annotations

import numpy as np
from torch import nn

from vitstudio.core.analysis.embeddings import fit_pca
from vitstudio.core.analysis.registers import own_prefix_tokens


def pos_embed_similarity(model: nn.Module) -> np.ndarray:
    """(gh, gw, gh, gw): cosine similarity between the learned position embeddings of every two patches."""
    pos = getattr(model, "pos_embed", None)
    if pos is None:
        raise ValueError(f"{type(model).__name__} has no learned position embedding.")
    pe = pos.detach().float().cpu()[0]  # (prefix + P, D) or (P, D): CaiT and no_embed_class models have none
    gh, gw = model.patch_embed.grid_size
    if pe.shape[0] in (gh * gw + own_prefix_tokens(model), gh * gw):  # prefix entries come first
        pe = pe[pe.shape[0] - gh * gw:]
    if pe.shape[0] != gh * gw:
        raise ValueError(f"Position embedding has {pe.shape[0]} patch entries, expected {gh}×{gw}.")
    unit = pe / pe.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (unit @ unit.T).reshape(gh, gw, gh, gw).numpy()


def filter_components(model: nn.Module, k: int = 28) -> np.ndarray:
    """(k, p, p, 3): the first k principal components of the RGB patch-embedding filters."""
    proj = getattr(model.patch_embed, "proj", None)
    weight = getattr(proj, "weight", None)
    if weight is None or weight.ndim != 4 or weight.shape[1] != 3:
        raise ValueError("The patch embedding is not a convolution over RGB pixels (hybrid stem?).")
    w = weight.detach().float().cpu().numpy()  # (D, 3, ph, pw)
    d, c, ph, pw = w.shape
    basis = fit_pca(w.reshape(d, c * ph * pw), k)
    return basis.components.reshape(-1, c, ph, pw).transpose(0, 2, 3, 1).copy()


# -- what the registry's model-intrinsic entries compute: fn(loaded, None, params) -> (array, extra) ----------
def explain_pos_embed(loaded, x, params: dict) -> tuple[np.ndarray, dict]:
    return pos_embed_similarity(loaded.model), {}


def explain_filters(loaded, x, params: dict) -> tuple[np.ndarray, dict]:
    params.update(components=28)
    return filter_components(loaded.model), {}
