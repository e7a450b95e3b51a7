"""Benchmark: does `vitstudio suggest` pick better images to label than chance? (issue 22 item 4)

    python tests/benchmarks/active.py [--model models/digits-vit] [--n 10] [--rounds 10] [--seeds 5]

A simulated labelling loop on the 1,797 scikit-learn digits with the answer key known: each seed holds out a random
30 % as the test set; the rest is the unlabelled pool. Each round labels N more images of the pool — the ones
`suggest` names (core/train/suggest.py: coverage first, then margin + k-center diversity) or N drawn at random —
then fits the quick head on everything labelled so far and scores it on the test set. Printed: both accuracy
curves against the label budget (mean of the seeds) and whether active ≥ random at every budget.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _features(model: str, data: Path) -> tuple[np.ndarray, np.ndarray]:
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.models.loading import load_model

    loaded = load_model(model, device="cpu")
    gen = embed_folder(loaded, [str(data)])
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        embedded = stop.value
    labels = np.asarray([int(Path(p).parent.name) for p in embedded.paths])
    return embedded.features_of(), labels


def _accuracy(x: np.ndarray, y: np.ndarray, labelled: np.ndarray, test: np.ndarray) -> float:
    """The quick head on the labelled rows (as `suggest` fits it), scored on the test rows."""
    from vitstudio.core.train.head_fit import fit_linear_head
    from vitstudio.core.train.suggest import _normalised

    xn = _normalised(x)
    if len(np.unique(y[labelled])) < 2:  # one class: the head can only say that class
        return float((y[test] == y[labelled][0]).mean())
    fit = fit_linear_head(xn[labelled], y[labelled], 10, l2=1e-3, steps=100)
    try:
        while True:
            next(fit)
    except StopIteration as stop:
        head = stop.value
    return float((head.logits(xn[test]).argmax(1) == y[test]).mean())


def _pick_suggested(known: np.ndarray, pool: np.ndarray, x: np.ndarray, n: int, factor: int) -> np.ndarray:
    """What `suggest` names, seeing the pool only (the test rows are never candidates)."""
    from vitstudio.core.train.suggest import suggest

    return pool[[p.index for p in suggest(x[pool], known[pool], n, 10, pool_factor=factor)]]


def _pick_random(known: np.ndarray, pool: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    free = pool[known[pool] < 0]
    return rng.choice(free, n, replace=False)


def _curve(x, y, pool, test, n, rounds, pick) -> list[float]:
    known = np.full(len(y), -1)
    curve = []
    for _ in range(rounds):
        chosen = pick(known, pool)
        known[chosen] = y[chosen]  # the answer key labels them
        curve.append(_accuracy(x, y, np.flatnonzero(known >= 0), test))
    return curve


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="auto", help="default: the bundled demo model")
    ap.add_argument("--n", type=int, default=10, help="labels per round")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--pool-factor", type=int, default=5, help="suggest's uncertainty pool, in multiples of N")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: these tiny fits are fastest on one "
                                                           "thread, and a shared CPU is not oversubscribed)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("VITSTUDIO_CACHE_DIR", tempfile.mkdtemp(prefix="vitstudio-bench-cache-"))
    from vitstudio.core.models.demo import bundled_demo, render_digits
    model = str(bundled_demo()) if args.model == "auto" else args.model
    x, y = _features(model, render_digits(Path(tempfile.mkdtemp(prefix="vitstudio-bench-")) / "digits"))
    active, chance = [], []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(y))
        test, pool = order[: int(0.3 * len(y))], order[int(0.3 * len(y)):]

        by_suggest = functools.partial(_pick_suggested, x=x, n=args.n, factor=args.pool_factor)
        at_random = functools.partial(_pick_random, n=args.n, rng=np.random.default_rng(1000 + seed))
        active.append(_curve(x, y, pool, test, args.n, args.rounds, by_suggest))
        chance.append(_curve(x, y, pool, test, args.n, args.rounds, at_random))
    a, r = np.mean(active, 0), np.mean(chance, 0)
    print(f"model {model}  {len(y)} digits  {args.n} labels per round  mean of {args.seeds} seeds (30 % test)  "
          f"suggest's pool {args.pool_factor}×N")
    print(f"  {'labels':>7}{'active':>10}{'random':>10}{'diff':>9}")
    for k in range(args.rounds):
        print(f"  {(k + 1) * args.n:7d}{a[k] * 100:9.2f}%{r[k] * 100:9.2f}%{(a[k] - r[k]) * 100:+8.2f}")
    print(f"  active >= random at every budget: {'yes' if np.all(a >= r) else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
