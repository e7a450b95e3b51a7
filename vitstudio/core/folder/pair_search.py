"""The near-duplicate check's pair searches (`duplicates.py`): every pair of images whose perceptual hashes (or one
against the other's mirror) differ in at most a few bits, every pair whose features' cosine is above a cut, and each
image's highest similarity to another (what the cuts are calibrated on).

Hashes: faiss's binary flat index, exhaustive popcounts in C++ — exact, and at 100k images ~10× faster than the
blocked float products below (which materialise every (block × N) similarity and its mask in Python).
Cosines: the exact blocked products up to EXACT_LIMIT images; beyond, faiss's inverted-file index (IVF) range
search: each image is compared only with the images of the NPROBE cells nearest to it, so a pair is missed only
when two images above the cut fall in cells that far apart — a near-duplicate pair (cosine ≥ 0.999 where the cut is
calibrated) sits in the same cell or the next; its recall against the exact search is tested
(tests/core/test_pair_search.py) and measured at 100k (tests/benchmarks/pair_search.py).
Without faiss (a platform without its wheel) the exact searches answer: slower, the same pairs.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch

EXACT_LIMIT = 20_000  # images; above, cosine pairs come from the IVF index (when faiss is installed)
NPROBE = 8  # IVF cells searched per image, of about √N
QUERY_CHUNK = 8192  # queries per range search: the result arrays of one call stay small
CALIBRATION_SAMPLE = 4000  # images whose nearest neighbour is searched to calibrate (all, in smaller folders)
SEARCHED_BYTES = 32 << 20  # the searched rows read (and their similarities to the queries computed) at a time

Pairs = tuple[np.ndarray, np.ndarray, np.ndarray]  # (i, j, value): i < j


def pairs_of(i, j, value) -> Pairs:
    return np.asarray(i, np.int64), np.asarray(j, np.int64), np.asarray(value, np.float32)


def concat_pairs(parts: list[Pairs]) -> Pairs:
    if not parts:
        return pairs_of([], [], [])
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))


def unit_rows(features: np.ndarray) -> torch.Tensor:
    x = torch.from_numpy(np.array(features, np.float32))
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def faiss_module():
    """faiss, or None where it is not installed (the exact searches answer then); the one place it is imported. Its
    loader tries the AVX512 and AVX2 builds first and logs each one missing with its ModuleNotFoundError (three
    lines on stderr wherever logging shows INFO, as the window's does): quiet while it loads."""
    loader = logging.getLogger("faiss.loader")
    level = loader.level
    loader.setLevel(logging.ERROR)
    try:
        import faiss
    except ImportError:
        return None
    finally:
        loader.setLevel(level)
    return faiss


def _queries(start: int, lims: np.ndarray) -> np.ndarray:
    """The query of each result of a faiss range search over queries start, start + 1, …"""
    return np.repeat(np.arange(start, start + len(lims) - 1), np.diff(lims.astype(np.int64)))


# -- exact, blocked -----------------------------------------------------------------------------------------------
def pairs_above(x: torch.Tensor, y: torch.Tensor, cut: float, block: int | None = None) -> Pairs:
    """Pairs i < j with x[i]·y[j] ≥ cut (or x[j]·y[i]: y may be x mirrored), in (block × N) products against the
    rows from the block on (the upper triangle only)."""
    block = block or max(64, ((64 if y is x else 24) << 20) // max(1, len(x)))  # ≤ ~256 MB of products alive
    parts = []
    for start in range(0, len(x), block):
        sims = x[start:start + block] @ y[start:].T  # (block, N - start): columns start + c
        if y is not x:  # y a transform of x (mirrored): a pair matches either way round
            sims = torch.maximum(sims, y[start:start + block] @ x[start:].T)
        rows, cols = torch.nonzero(sims >= cut, as_tuple=True)
        keep = rows < cols
        rows, cols = rows[keep], cols[keep]
        parts.append(pairs_of((start + rows).numpy(), (start + cols).numpy(), sims[rows, cols].numpy()))
    return concat_pairs(parts)


def nearest_similarity(x, y=None, sample: int = CALIBRATION_SAMPLE) -> np.ndarray:
    """Each row's highest similarity to another row (x[i]·x[j] or x[i]·y[j], j ≠ i), for at most `sample` rows (a
    fixed random subset beyond that: the median needs no more). `x`, `y`: (N, D) tensors, arrays or a cache's
    `RowView`s: the rows searched are read SEARCHED_BYTES at a time, never held whole (100k thumbnails and their
    mirrors are 200 MB); each part's top two by faiss (BLAS in blocks) where installed, by a product otherwise."""
    rows = _calibration_rows(len(x), sample)
    faiss = faiss_module()
    queries = _dense(x, rows)
    best = np.full(len(rows), -np.inf, np.float32)
    step = max(256, SEARCHED_BYTES // (4 * max(1, len(rows), x.shape[1])))
    for against in (x,) if y is None else (x, y):
        for start in range(0, len(x), step):
            part = _dense(against, slice(start, start + step))
            if faiss is not None and len(part) > 1:
                sims, found = faiss.knn(queries, part, 2, faiss.METRIC_INNER_PRODUCT)
            else:
                top = torch.from_numpy(queries @ part.T).topk(min(2, len(part)), 1)
                sims, found = top.values.numpy(), top.indices.numpy()
            second = sims[:, 1] if sims.shape[1] > 1 else np.full(len(rows), -np.inf, np.float32)
            own = found[:, 0] + start == rows  # the row itself (against y: its own mirror) is not its neighbour
            best = np.maximum(best, np.where(own, second, sims[:, 0]))
    return best


def _dense(x, index) -> np.ndarray:
    part = x[index]
    return np.ascontiguousarray(part.numpy() if isinstance(part, torch.Tensor) else part, np.float32)


def _calibration_rows(n: int, sample: int) -> np.ndarray:
    """Every row, or a fixed random `sample` of them (the median needs no more)."""
    return np.arange(n) if n <= sample else np.sort(np.random.default_rng(0).choice(n, sample, replace=False))


def nearest_hamming(bits: np.ndarray, mirror_bits: np.ndarray, sample: int = CALIBRATION_SAMPLE) -> np.ndarray:
    """Each row's Hamming distance to the nearest other row's hash or its mirror's (`nearest_similarity` of the
    ±1 signs, in bits), for the same rows: by faiss's binary index (popcounts) where it is installed."""
    faiss = faiss_module()
    if faiss is None or len(bits) < 2 or bits.shape[1] % 8:
        signs = [torch.from_numpy(np.asarray(b)).float() * 2 - 1 for b in (bits, mirror_bits)]  # a·b = bits - 2d
        return (bits.shape[1] - nearest_similarity(*signs, sample=sample)) / 2
    rows = _calibration_rows(len(bits), sample)
    packed = np.packbits(bits, axis=1)
    best = np.full(len(rows), np.inf)
    for against in (packed, np.packbits(mirror_bits, axis=1)):
        index = faiss.IndexBinaryFlat(bits.shape[1])
        index.add(against)
        distance, found = index.search(packed[rows], 2)
        best = np.minimum(best, np.where(found[:, 0] == rows, distance[:, 1], distance[:, 0]))
    return best.astype(np.float32)


# -- perceptual hashes --------------------------------------------------------------------------------------------
def hamming_pairs(bits: np.ndarray, mirror_bits: np.ndarray, max_distance: int) -> Pairs:
    """Pairs i < j whose hashes (or one against the other's mirror) differ in ≤ max_distance bits (values 0)."""
    n = len(bits)
    faiss = faiss_module()
    if not n:
        return pairs_of([], [], [])
    if faiss is None or bits.shape[1] % 8:
        a = torch.from_numpy(np.asarray(bits)).float() * 2 - 1  # ±1: a·b = bits - 2 · distance
        m = torch.from_numpy(np.asarray(mirror_bits)).float() * 2 - 1
        cut = bits.shape[1] - 2 * max_distance - 1e-3
        i, j, _ = concat_pairs([pairs_above(a, m, cut), pairs_above(a, a, cut)])
    else:
        index = faiss.IndexBinaryFlat(bits.shape[1])
        index.add(np.packbits(bits, axis=1))
        i, j = [], []
        for queries in (np.packbits(bits, axis=1), np.packbits(mirror_bits, axis=1)):  # every ordered pair: both ways
            for start in range(0, n, QUERY_CHUNK):
                lims, _, found = index.range_search(queries[start:start + QUERY_CHUNK], max_distance + 1)  # < radius
                q = _queries(start, lims)
                other = q != found  # an image is not its own pair (nor its own mirror: a symmetric image)
                i.append(np.minimum(q, found)[other])
                j.append(np.maximum(q, found)[other])
        i, j = np.concatenate(i), np.concatenate(j)
    key = np.unique(np.asarray(i, np.int64) * n + j)
    return pairs_of(key // n, key % n, np.zeros(len(key)))


# -- feature cosines ----------------------------------------------------------------------------------------------
def cosine_pairs(features, threshold: float, block: int | None = None, exact_limit: int = EXACT_LIMIT) -> Pairs:
    """Pairs i < j with cosine similarity ≥ threshold: exact (blocked products sized to ~256 MB: 100k images,
    640 rows at a time) up to `exact_limit` images, from faiss's IVF index beyond (see the module's note)."""
    x = features if isinstance(features, torch.Tensor) else unit_rows(features)
    faiss = faiss_module()
    if len(x) <= exact_limit or faiss is None:
        return pairs_above(x, x, threshold, block)
    return _ivf_pairs(faiss, np.ascontiguousarray(x.numpy(), np.float32), threshold)


def _ivf_pairs(faiss, x: np.ndarray, cut: float) -> Pairs:
    n, d = x.shape
    cells = max(1, int(math.sqrt(n)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, cells, faiss.METRIC_INNER_PRODUCT)
    train = x if n <= 64 * cells else x[np.random.default_rng(0).choice(n, 64 * cells, replace=False)]
    index.train(train)  # k-means of the cells (faiss's fixed seed: the same cells every run)
    index.add(x)
    index.nprobe = min(NPROBE, cells)
    radius = float(np.nextafter(np.float32(cut), np.float32(-2)))  # faiss keeps similarity > radius; we want ≥ cut
    keys, values = [], []
    for start in range(0, n, QUERY_CHUNK):
        lims, sims, found = index.range_search(x[start:start + QUERY_CHUNK], radius)
        q = _queries(start, lims)
        keep = (q != found) & (sims >= cut)
        # both ends kept: the probe is not symmetric (j's cells may hold i when i's do not hold j)
        keys.append(np.minimum(q, found)[keep] * n + np.maximum(q, found)[keep])
        values.append(sims[keep])
    key, first = np.unique(np.concatenate(keys), return_index=True)
    return pairs_of(key // n, key % n, np.concatenate(values)[first])
