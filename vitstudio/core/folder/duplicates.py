"""Exact and near-duplicate images, grouped, and the groups that leak across a train/val split.

- exact: the same bytes (SHA-256 of the file);
- near, model-free first pass: perceptual hashes (`imagehash.phash`, 64 bits) within a Hamming distance;
- near, through the model: cosine similarity of the pooled features above a threshold, computed in blocks with
  one matrix product each (exact; `neighbours.py` has the k-nearest search).
Pairs from all three are joined into groups (union-find); a group with members in both train and val is a leak:
the validation score is inflated by images the model trained on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from vitstudio.core.data.images import ImageReadError, file_digest, read_image

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


def exact_pairs(paths: Sequence[str]) -> list[tuple[int, int, float]]:
    first: dict[str, int] = {}
    pairs = []
    for i, path in enumerate(paths):
        j = first.setdefault(file_digest(path), i)
        if j != i:
            pairs.append((j, i, 1.0))
    return pairs


def perceptual_pairs(paths: Sequence[str], max_distance: int = PHASH_DISTANCE) -> list[tuple[int, int, float]]:
    """Pairs whose 64-bit perceptual hashes differ in at most `max_distance` bits (unreadable files skipped)."""
    import imagehash

    bits, index = [], []
    for i, path in enumerate(paths):
        try:
            bits.append(np.asarray(imagehash.phash(read_image(path)).hash, bool).reshape(-1))
            index.append(i)
        except ImageReadError:
            continue
    if len(bits) < 2:
        return []
    codes = torch.from_numpy(np.stack(bits)).float()
    pairs = []
    for start in range(0, len(codes), 2048):  # Hamming distance = mismatches, by one product per block
        block = codes[start:start + 2048]
        distance = block @ (1 - codes).T + (1 - block) @ codes.T
        rows, cols = torch.nonzero(distance <= max_distance, as_tuple=True)
        for r, c in zip(rows.tolist(), cols.tolist()):
            if start + r < c:
                pairs.append((index[start + r], index[c], float("nan")))
    return pairs


def cosine_pairs(features: np.ndarray, threshold: float = COSINE_THRESHOLD, block: int | None = None
                 ) -> list[tuple[int, int, float]]:
    """All pairs i < j with cosine similarity ≥ threshold, exact, in (block × N) products: the block is sized so
    one product stays near 256 MB (100k images: 640 rows at a time)."""
    x = torch.from_numpy(np.asarray(features, np.float32))
    x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    block = block or max(64, (64 << 20) // max(1, len(x)))
    pairs = []
    for start in range(0, len(x), block):
        sims = x[start:start + block] @ x.T
        rows, cols = torch.nonzero(sims >= threshold, as_tuple=True)
        keep = start + rows < cols
        for r, c in zip(rows[keep].tolist(), cols[keep].tolist()):
            pairs.append((start + r, c, float(sims[r, c])))
    return pairs


def group_pairs(paths: Sequence[str], evidence: dict[str, Iterable[tuple[int, int, float]]],
                val: set[str] | None = None) -> list[DuplicateGroup]:
    """Union-find over every pair; each group lists its evidence and whether it straddles the split."""
    parent = list(range(len(paths)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    kinds: dict[int, set[str]] = {}
    lowest: dict[int, float] = {}
    links = []
    for kind, pairs in evidence.items():
        for i, j, sim in pairs:
            links.append((i, j, kind, sim))
            parent[find(i)] = find(j)
    for i, _j, kind, sim in links:
        root = find(i)
        kinds.setdefault(root, set()).add(kind)
        if not np.isnan(sim):
            lowest[root] = min(lowest.get(root, 1.0), sim)
    members: dict[int, list[int]] = {}
    for i in range(len(paths)):
        if find(i) in kinds:
            members.setdefault(find(i), []).append(i)
    groups = []
    for root, idx in members.items():
        group = tuple(paths[i] for i in idx)
        leak = val is not None and any(p in val for p in group) and any(p not in val for p in group)
        groups.append(DuplicateGroup(group, tuple(sorted(kinds[root])), lowest.get(root, float("nan")), leak))
    return sorted(groups, key=lambda g: (not g.leak, g.paths))
