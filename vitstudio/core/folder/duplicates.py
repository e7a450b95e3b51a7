"""Exact and near-duplicate images, grouped, and the groups that leak across a train/val split.

- exact: the same bytes (SHA-256 of the file);
- near, model-free first pass: perceptual hashes (`imagehash.phash`, 64 bits) within a Hamming distance;
- near, through the model: cosine similarity of the pooled features above a threshold, computed in blocks with
  one matrix product each (exact; `neighbours.py` has the k-nearest search).
Pairs from all three are joined into groups (union-find); a group with members in both train and val is a leak:
the validation score is inflated by images the model trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from vitstudio.core.data.images import ImageReadError, copy_candidate_digests, read_image

PHASH_DISTANCE = 6  # of 64 bits: re-encodes, small resizes and brightness changes stay within it
# Model-dependent: self-supervised features (DINOv2/v3) separate instances, so copies with crops or colour changes
# sit above it; a small classifier's pre-logits put a whole class this close (then raise it, or rely on the hashes)
COSINE_THRESHOLD = 0.97


@dataclass(frozen=True)
class DuplicateGroup:
    paths: tuple[str, ...]
    kinds: tuple[str, ...]  # evidence found: 'exact', 'phash', 'embedding'
    similarity: float  # the lowest cosine similarity of a linking pair (1.0 for exact copies, NaN without a model)
    leak: bool = False  # members on both sides of the split

    def to_dict(self) -> dict:
        return {"paths": list(self.paths), "kinds": list(self.kinds), "similarity": self.similarity,
                "leak": self.leak}


Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]  # (i, j, similarity): i < j, NaN where none was measured


def _pairs(i, j, sim) -> Pairs:
    return np.asarray(i, np.int64), np.asarray(j, np.int64), np.asarray(sim, np.float32)


def _concat(parts: list[Pairs]) -> Pairs:
    if not parts:
        return _pairs([], [], [])
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))


def exact_pairs(paths: Sequence[str]) -> Pairs:
    digests = copy_candidate_digests(paths)  # only files of a size another file shares are hashed
    first: dict[str, int] = {}
    i, j = [], []
    for k, path in enumerate(paths):
        digest = digests.get(str(path))
        if digest is None:  # no other file of its size: no exact copy
            continue
        m = first.setdefault(digest, k)
        if m != k:
            i.append(m)
            j.append(k)
    return _pairs(i, j, np.ones(len(i)))


def perceptual_pairs(paths: Sequence[str], max_distance: int = PHASH_DISTANCE) -> Pairs:
    """Pairs whose 64-bit perceptual hashes differ in at most `max_distance` bits (unreadable files skipped)."""
    import imagehash

    bits, index = [], []
    for k, path in enumerate(paths):
        try:
            bits.append(np.asarray(imagehash.phash(read_image(path)).hash, bool).reshape(-1))
            index.append(k)
        except ImageReadError:
            continue
    if len(bits) < 2:
        return _pairs([], [], [])
    codes = torch.from_numpy(np.stack(bits)).float()
    index = np.asarray(index)
    parts = []
    step = max(64, (16 << 20) // len(codes))  # three (step × N) float32 products alive at once: ~200 MB
    for start in range(0, len(codes), step):  # Hamming distance = mismatches, by one product per block
        block = codes[start:start + step]
        distance = block @ (1 - codes).T + (1 - block) @ codes.T
        rows, cols = (t.numpy() for t in torch.nonzero(distance <= max_distance, as_tuple=True))
        keep = start + rows < cols
        parts.append(_pairs(index[start + rows[keep]], index[cols[keep]], np.full(keep.sum(), np.nan)))
    return _concat(parts)


def cosine_pairs(features: np.ndarray, threshold: float = COSINE_THRESHOLD, block: int | None = None) -> Pairs:
    """All pairs i < j with cosine similarity ≥ threshold, exact, in (block × N) products: the block is sized so
    one product stays near 256 MB (100k images: 640 rows at a time)."""
    x = torch.from_numpy(np.array(features, np.float32))
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    block = block or max(64, (64 << 20) // max(1, len(x)))
    parts = []
    for start in range(0, len(x), block):
        sims = x[start:start + block] @ x.T
        rows, cols = torch.nonzero(sims >= threshold, as_tuple=True)
        keep = start + rows < cols
        rows, cols = rows[keep], cols[keep]
        parts.append(_pairs((start + rows).numpy(), cols.numpy(), sims[rows, cols].numpy()))
    return _concat(parts)


def group_pairs(paths: Sequence[str], evidence: dict[str, Pairs], val: set[str] | None = None
                ) -> list[DuplicateGroup]:
    """Connected components over every pair; each group lists its evidence and whether it straddles the split."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(paths)
    i = np.concatenate([p[0] for p in evidence.values()] or [np.zeros(0, np.int64)])
    j = np.concatenate([p[1] for p in evidence.values()] or [np.zeros(0, np.int64)])
    if not len(i):
        return []
    _, label = connected_components(coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n)), directed=False)
    kinds: dict[int, set[str]] = {}
    lowest = np.full(label.max() + 1, np.inf)
    for kind, (pi, _pj, sim) in evidence.items():
        for component in np.unique(label[pi]):
            kinds.setdefault(int(component), set()).add(kind)
        measured = ~np.isnan(sim)
        np.minimum.at(lowest, label[pi[measured]], sim[measured])
    order = np.argsort(label, kind="stable")
    groups = []
    starts = np.searchsorted(label[order], np.arange(label.max() + 2))
    for component, (lo, hi) in enumerate(zip(starts[:-1], starts[1:])):
        if component not in kinds:
            continue
        group = tuple(paths[k] for k in order[lo:hi])
        leak = val is not None and any(p in val for p in group) and any(p not in val for p in group)
        sim = float(lowest[component]) if np.isfinite(lowest[component]) else float("nan")
        groups.append(DuplicateGroup(group, tuple(sorted(kinds[component])), sim, leak))
    return sorted(groups, key=lambda g: (not g.leak, g.paths))
