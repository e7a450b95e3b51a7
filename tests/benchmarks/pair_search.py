"""Benchmark: the near-duplicate check's pair searches (core/folder/pair_search.py) beside the exact blocked products
they replaced, on the same arrays in one process: seconds, the ratio, and the recall of each search against the
exact one (the pairs both find / the pairs the exact search finds; the calibration's: 1 when its figures equal).

    python tests/benchmarks/pair_search.py                  (20k and 100k images)
    python tests/benchmarks/pair_search.py --sizes 100000 --dim 768

Data: hashes and features shaped like a folder's. Features: unit vectors in 50 tight clusters (a classifier's
classes), 1 % of the images planted as near-copies of another (cosine ~0.9999); the cut is calibrated the way
`duplicates.calibrate` does (the median nearest-neighbour cosine, 10× closer), and a 10× looser cut (the median
itself: many pairs) shows the IVF probe's recall where it is hardest. Hashes: 64 random bits, 1 % planted within 3
bits of another, the mirror hash another random 64 bits; cut 10 bits (the default).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vitstudio.core.folder import pair_search as P


def _data(n: int, dim: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(50, dim))
    x = centres[rng.integers(0, 50, n)] + 0.4 * rng.normal(size=(n, dim))
    copies = rng.choice(n, (n // 100, 2), replace=False)
    x[copies[:, 1]] = x[copies[:, 0]] + 0.01 * rng.normal(size=(len(copies), dim))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    bits = rng.random((n, 64)) < 0.5
    bits[copies[:, 1]] = bits[copies[:, 0]] ^ (rng.random((len(copies), 64)) < 3 / 64)
    return x, bits, rng.random((n, 64)) < 0.5


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def _recall(exact, found) -> float:
    want = set(zip(exact[0].tolist(), exact[1].tolist()))
    got = set(zip(found[0].tolist(), found[1].tolist()))
    return len(want & got) / max(1, len(want))


def _rows(n: int, dim: int) -> list[tuple]:
    """(search, exact seconds, ours, pairs the exact search finds, recall) at n images."""
    x, bits, mirror = _data(n, dim)
    t = P.unit_rows(x)
    median = float(np.median(P.nearest_similarity(t)))
    rows = []
    for name, cut in (("cosine, calibrated cut", 1 - (1 - median) / 10), ("cosine, 10× looser cut", median)):
        slow, exact = _timed(P.pairs_above, t, t, cut)
        fast, found = _timed(P.cosine_pairs, t, cut, None, 0)  # exact_limit 0: the IVF index
        rows.append((f"{name} ({cut:.5f})", slow, fast, len(exact[0]), _recall(exact, found)))
    slow, exact = _timed(_without_faiss, P.hamming_pairs, bits, mirror, 10)
    fast, found = _timed(P.hamming_pairs, bits, mirror, 10)
    rows.append(("hash ≤ 10 bits, mirror both ways", slow, fast, len(exact[0]), _recall(exact, found)))
    slow, exact = _timed(_without_faiss, P.nearest_similarity, t)
    fast, found = _timed(P.nearest_similarity, t)
    rows.append(("calibration: 4000 nearest", slow, fast, 0, float(np.allclose(exact, found, atol=1e-5))))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 100000])
    parser.add_argument("--dim", type=int, default=192, help="feature width (ViT-Ti 192, S 384, B 768)")
    args = parser.parse_args()
    if P.faiss_module() is None:
        raise SystemExit("faiss is not installed: there is nothing to compare")
    print(f"{'search':<40}{'images':>8}{'exact s':>9}{'ours s':>8}{'ratio':>8}{'pairs':>9}{'recall':>8}")
    for n in args.sizes:
        for name, slow, fast, pairs, recall in _rows(n, args.dim):
            print(f"{name:<40}{n:>8}{slow:>9.2f}{fast:>8.2f}{slow / fast:>7.1f}×{pairs:>9}{recall:>8.4f}", flush=True)
    return 0


def _without_faiss(search, *args):
    """`search` as it ran before faiss: the exact blocked products."""
    saved = P.faiss_module
    P.faiss_module = lambda: None
    try:
        return search(*args)
    finally:
        P.faiss_module = saved


if __name__ == "__main__":
    raise SystemExit(main())
