"""Similar images: the k nearest neighbours of some images by cosine similarity of their pooled features, and a
2-D map of a folder (UMAP where `umap-learn` is installed, PCA otherwise).

Exact search is one (queries × N) matrix product per block of queries, with the features read from the cache's
memory map in blocks, so a 100k-image folder never needs its whole (N × D) matrix normalised on the heap at once.
Beyond EXACT_LIMIT images `faiss` (when installed) answers instead, with an exact inner-product index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitstudio.core.folder.keyedstore import RowView
from vitstudio.core.folder.pair_search import faiss_module, unit_rows  # unit_rows copies: mapped blocks are read-only

EXACT_LIMIT = 50_000


@dataclass(frozen=True)
class Neighbours:
    indices: np.ndarray  # (queries, k) positions in the folder, most similar first (the image itself excluded)
    similarities: np.ndarray  # (queries, k) cosine similarities


def nearest(features: np.ndarray, queries: list[int], k: int = 8, block: int = 8192,
            rows: np.ndarray | None = None) -> Neighbours:
    """k nearest neighbours (cosine) of the images at `queries` among all of `features` (N, D); with `rows`, the
    images are features[rows] (a cache's memory map, read a block at a time) and answers index into `rows`."""
    features = RowView(features, rows)
    n = len(features)
    k = min(k, n - 1)
    if k <= 0:
        return Neighbours(np.zeros((len(queries), 0), np.int64), np.zeros((len(queries), 0), np.float32))
    q = unit_rows(features[np.asarray(queries)])
    if n > EXACT_LIMIT:
        try:
            return _faiss_nearest(features, q, queries, k)
        except ImportError:
            pass  # exact search below: slower, same answer
    best_sim = torch.full((len(queries), k), -2.0)
    best_idx = torch.zeros((len(queries), k), dtype=torch.long)
    for start in range(0, n, block):
        sims = q @ unit_rows(features[start:start + block]).T  # (queries, block)
        for row, qi in enumerate(queries):  # an image is not its own neighbour
            if start <= qi < start + sims.shape[1]:
                sims[row, qi - start] = -2.0
        sims = torch.cat([best_sim, sims], 1)
        idx = torch.cat([best_idx, torch.arange(start, start + sims.shape[1] - k).expand(len(queries), -1)], 1)
        best_sim, order = sims.topk(k, dim=1)
        best_idx = idx.gather(1, order)
    return Neighbours(best_idx.numpy(), best_sim.numpy())


def _faiss_nearest(features, q: torch.Tensor, queries: list[int], k: int) -> Neighbours:
    faiss = faiss_module()
    if faiss is None:
        raise ImportError("faiss is not installed")

    index = faiss.IndexFlatIP(features.shape[1])
    for start in range(0, len(features), 8192):
        index.add(unit_rows(features[start:start + 8192]).numpy())
    sims, idx = index.search(q.numpy(), k + 1)
    keep = [[j for j in range(k + 1) if idx[r, j] != queries[r]][:k] for r in range(len(queries))]
    return Neighbours(np.take_along_axis(idx, np.asarray(keep), 1), np.take_along_axis(sims, np.asarray(keep), 1))


def project_2d(features, method: str = "auto", seed: int = 0) -> tuple[np.ndarray, str]:
    """((N, 2) coordinates, the method used): 'umap' (when umap-learn is installed and N ≥ 10), else 'pca'.
    `features`: an (N, D) array or a `RowView` of a cache (PCA then reads it a block at a time)."""
    n = len(features)
    if method in ("auto", "umap") and n >= 10:
        try:
            import umap

            reducer = umap.UMAP(n_components=2, metric="cosine", random_state=seed, n_neighbors=min(15, n - 1))
            return reducer.fit_transform(np.asarray(features[0:n], np.float32)).astype(np.float32), "umap"
        except ImportError:
            if method == "umap":
                raise ImportError("UMAP needs umap-learn: pip install 'vitstudio[maps]'.") from None
    if n < 2:
        return np.zeros((n, 2), np.float32), "pca"
    return pca_2d(features), "pca"


def pca_2d(x, block: int = 16384) -> np.ndarray:
    """(N, 2) projection on the first two principal components, through the (D × D) covariance accumulated in
    blocks (float64): memory is D² + one block, not the N × D copies an SVD of the data needs. Signs follow
    `fit_pca` (each component's largest loading positive)."""
    n, d = x.shape
    mean = np.zeros(d)
    for start in range(0, n, block):
        mean += x[start:start + block].sum(0, dtype=np.float64)
    mean /= n
    cov = np.zeros((d, d))
    for start in range(0, n, block):
        c = x[start:start + block].astype(np.float64) - mean
        cov += c.T @ c
    _, vectors = np.linalg.eigh(cov)
    comps = vectors[:, ::-1][:, :2].T
    comps *= np.sign(comps[np.arange(2), np.abs(comps).argmax(1)])[:, None]
    out = np.empty((n, 2), np.float32)
    for start in range(0, n, block):
        out[start:start + block] = (x[start:start + block].astype(np.float64) - mean) @ comps.T
    return out
