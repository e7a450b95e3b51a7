"""Segmentation by retrieval (Balažević et al., "Towards In-context Scene Understanding", NeurIPS 2023), as the open
reference `vpariza/open-hummingbird-eval` computes it: a memory bank of unit-length patch features with their labels
(each patch's share of every class), each query patch's k nearest memory patches by cosine similarity, a softmax of
those similarities over a temperature, and the neighbours' label distributions summed with those weights; then the
patch logits upsampled bilinearly to the image and the argmax taken per pixel.

    memory rows L2-normalised                    hbird/hbird_eval.py:323 (and :334 for a sampled memory)
    k nearest by inner product (query as is)     hbird/nn/search_faiss.py:44 (GpuIndexFlatIP), hbird_eval.py:622-628
    softmax(q̂ · k̂ / β) over the k neighbours     hbird/hbird_eval.py:593-604 (β = 0.02 at :576)
    weighted sum of the neighbours' labels       hbird/hbird_eval.py:606-609
    bilinear to the image, argmax                hbird/hbird_eval.py:234-243
    k = 30                                       hbird/hbird_eval.py:102, eval.py:407

The inner product of an unnormalised query with unit memory rows ranks them as the cosine does (the query's norm is
one positive factor per query), so the neighbours are the cosine's; here the query is made unit first, so the top-k
values are the cosines the softmax weighs. faiss is not used here: an exact top-k of
a matrix product (torch.topk) is what faiss's flat index computes, chunked so the similarity block stays ~128 MB.

A bank too large for memory is capped (`cap_bank`): by random choice or by farthest-point sampling (each next row the
one least similar to those kept), and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from vitstudio.core.dense.settings import CAP_METHODS, DEFAULT_CAP, DEFAULT_K, DEFAULT_TEMPERATURE

_BLOCK = 1 << 25  # similarity entries per chunk (128 MB of float32)


@dataclass(frozen=True)
class MemoryBank:
    features: np.ndarray  # (M, D) float32, unit rows
    labels: np.ndarray  # (M, C) float32, each row a distribution over the classes
    classes: tuple[str, ...]
    capped_from: int = 0  # the rows before capping (0: not capped)
    cap_method: str = ""

    def __len__(self) -> int:
        return len(self.features)

    @property
    def note(self) -> str:
        """What the user is told about the bank ('' when nothing was left out)."""
        if not self.capped_from:
            return ""
        return (f"the memory bank held {self.capped_from:,} painted patches; kept {len(self):,} of them by "
                f"{'farthest-point' if self.cap_method == 'farthest' else 'random'} sampling (--cap)")


def check_retrieval(k: int = DEFAULT_K, temperature: float = DEFAULT_TEMPERATURE, cap: int = DEFAULT_CAP,
                    method: str = "random") -> None:
    """ValueError in one line for settings the retrieval cannot take (checked before any image is read)."""
    if k < 1:
        raise ValueError(f"--k is the neighbours each patch is voted by, at least 1; not {k}")
    if not temperature > 0:
        raise ValueError(f"--temperature divides the similarities, so it is above 0; not {temperature}")
    if cap < 1:
        raise ValueError(f"--cap is the most patches the memory bank holds, at least 1; not {cap}")
    if method not in CAP_METHODS:
        raise ValueError(f"the bank is capped by {' or '.join(CAP_METHODS)} sampling, not '{method}'")


def unit_rows(features: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (hbird divides by the norm with no epsilon; a zero row stays zero here)."""
    x = np.asarray(features, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def build_bank(features: np.ndarray, labels: np.ndarray, classes: tuple[str, ...], cap: int = DEFAULT_CAP,
               method: str = "random", seed: int = 0) -> MemoryBank:
    """A bank of (M, D) features with (M, C) labels, capped at `cap` rows by `method`."""
    check_retrieval(cap=cap, method=method)
    features, labels = unit_rows(features), np.asarray(labels, np.float32)
    if len(features) <= cap:
        return MemoryBank(features, labels, tuple(classes))
    keep = (farthest_points(features, cap, seed) if method == "farthest"
            else np.sort(np.random.default_rng(seed).choice(len(features), cap, replace=False)))
    return MemoryBank(features[keep], labels[keep], tuple(classes), len(features), method)


def farthest_points(unit: np.ndarray, count: int, seed: int = 0) -> np.ndarray:
    """Greedy farthest-point sampling under cosine distance: from a random first row, each next row is the one whose
    highest similarity to the rows already kept is lowest. (count,) int64 row indices."""
    x = torch.from_numpy(np.ascontiguousarray(unit))
    first = int(np.random.default_rng(seed).integers(len(x)))
    kept = [first]
    nearest = x @ x[first]  # (M,) each row's highest similarity to the kept rows
    for _ in range(count - 1):
        pick = int(torch.argmin(nearest))
        kept.append(pick)
        nearest = torch.maximum(nearest, x @ x[pick])
    return np.asarray(kept, np.int64)


def top_k(queries: np.ndarray, keys: np.ndarray, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """((N, k) similarities, (N, k) indices) of each query's k highest inner products with `keys`, exact."""
    q, m = torch.from_numpy(np.ascontiguousarray(queries, np.float32)), torch.from_numpy(keys)
    k = min(k, len(m))
    step = max(1, _BLOCK // max(1, len(m)))
    values, index = [], []
    for start in range(0, len(q), step):
        v, i = (q[start:start + step] @ m.T).topk(k, dim=1)
        values.append(v)
        index.append(i)
    return torch.cat(values), torch.cat(index)


def vote(queries: np.ndarray, bank: MemoryBank, k: int = DEFAULT_K,
         temperature: float = DEFAULT_TEMPERATURE) -> np.ndarray:
    """(N, D) query patch features -> (N, C) patch logits: the label distributions of the k nearest memory patches,
    weighted by softmax(cosine / temperature) (hbird's `_cross_attention`)."""
    check_retrieval(k, temperature)
    # top-k on the unit queries: the neighbours' similarities are then their cosines, which hbird recomputes from the
    # gathered neighbour features (a (N, k, D) gather: 1 GB for 64 ViT-B images at k 30), the same numbers
    values, index = top_k(unit_rows(queries), bank.features, k)
    weights = F.softmax(values / temperature, dim=-1)  # (N, k)
    return torch.einsum("nk,nkc->nc", weights, torch.from_numpy(bank.labels)[index]).numpy()


def pixel_labels(logits: np.ndarray, image_hw: tuple[int, int], box: tuple[int, int, int, int],
                 outside: int = 255) -> np.ndarray:
    """(gh, gw, C) patch logits -> (H, W) uint8 class per pixel of the image: bilinear on the logits over the crop
    box the model saw (as hbird upsamples to its input), argmax; pixels outside the crop, which the model never saw,
    get `outside`."""
    top, left, h, w = box
    t = torch.from_numpy(np.ascontiguousarray(logits, np.float32)).permute(2, 0, 1)[None]
    up = F.interpolate(t, size=(h, w), mode="bilinear", align_corners=False)[0]
    out = np.full(image_hw, outside, np.uint8)
    # numpy's argmax over the leading axis (first maximum on ties, as torch's): torch's reduction over a non-innermost
    # dim took ~30 ms for a 451x300 image, 10x numpy's
    out[top:top + h, left:left + w] = up.numpy().argmax(0).astype(np.uint8)
    return out


def class_shares(labels: np.ndarray, classes: int) -> np.ndarray:
    """(C,) each class's share of the image's pixels (pixels outside the crop count in none)."""
    return np.bincount(labels.ravel(), minlength=256)[:classes] / labels.size
