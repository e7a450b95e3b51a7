"""What to label next: the unlabelled images whose labels would teach the quick head most.

With at least two classes labelled, a quick head (head_fit.py) is fitted on the labelled features; the unlabelled
images it is least sure about (smallest margin between its two most probable classes) form a pool of a few times
N, and k-center greedy on the features picks N of them that are far from each other and from what is labelled
(uncertain *and* diverse: N near-copies of one confusing image teach no more than one). With fewer than two
classes labelled there is no head yet: k-center greedy over all images covers the feature space (Sener & Savarese
2018, "core-set"). Distances are Euclidean between L2-normalised features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vitstudio.core.train.head_fit import fit_linear_head

POOL_FACTOR = 5  # the uncertainty pool holds this many times N images (diversity picks N among them)


@dataclass(frozen=True)
class Suggestion:
    index: int  # row in the features given
    margin: float | None  # p(top 1) − p(top 2) of the current head; None when picked for coverage
    distance: float  # to the nearest labelled (or already suggested) image, when it was picked
    predicted: int | None  # the head's class, None for coverage


def _normalised(features: np.ndarray) -> np.ndarray:
    x = np.asarray(features, np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(len(x), len(y)) Euclidean distances between unit vectors: sqrt(2 − 2 cos)."""
    return np.sqrt(np.maximum(2.0 - 2.0 * (x @ y.T), 0.0))


def k_center_greedy(features: np.ndarray, candidates: np.ndarray, centres: np.ndarray, n: int
                    ) -> list[tuple[int, float]]:
    """(index, its distance when picked) for `n` candidates, each the farthest (L2-normalised `features`) from the
    centres and the picks so far. Without centres the first pick is the candidate nearest the candidates' mean
    (a typical image, not an outlier)."""
    candidates = np.asarray(candidates, np.int64)
    x = features[candidates]
    nearest = np.full(len(candidates), np.inf, np.float32)
    for start in range(0, len(centres), 1024):  # a block of centres at a time: memory stays (candidates, 1024)
        nearest = np.minimum(nearest, _distances(x, features[centres[start:start + 1024]]).min(1))
    picks: list[tuple[int, float]] = []
    while len(picks) < min(n, len(candidates)):
        if not len(centres) and not picks:
            best, distance = int(np.argmin(((x - x.mean(0)) ** 2).sum(1))), 0.0
        else:
            best = int(np.argmax(nearest))
            distance = float(nearest[best])
        picks.append((int(candidates[best]), distance))
        nearest = np.minimum(nearest, _distances(x, x[best:best + 1])[:, 0])
        nearest[best] = -np.inf
    return picks


def fit_probabilities(features: np.ndarray, labels: np.ndarray, num_classes: int, l2: float = 1e-3) -> np.ndarray:
    """(N, num_classes) probabilities of every row under the quick head fitted on the labelled rows (labels >= 0)
    of the L2-normalised features: the head `suggest` ranks by, and the Folder tab colours the map with."""
    labels = np.asarray(labels, np.int64)
    x = _normalised(features)
    labelled = np.flatnonzero(labels >= 0)
    fit = fit_linear_head(x[labelled], labels[labelled], num_classes, l2=l2, steps=100)
    try:
        while True:
            next(fit)
    except StopIteration as stop:
        head = stop.value
    logits = head.logits(x).astype(np.float64)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    return probs / probs.sum(1, keepdims=True)


def suggest(features: np.ndarray, labels: np.ndarray, n: int, num_classes: int | None = None,
            l2: float = 1e-3, pool_factor: int = POOL_FACTOR) -> list[Suggestion]:
    """`n` unlabelled rows to label next; `labels` holds a class index per row, -1 for unlabelled."""
    labels = np.asarray(labels, np.int64)
    x = _normalised(features)
    labelled, unlabelled = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
    if len(np.unique(labels[labelled])) < 2:
        return [Suggestion(i, None, d, None) for i, d in k_center_greedy(x, unlabelled, labelled, n)]
    probs = fit_probabilities(features, labels, num_classes or int(labels.max()) + 1, l2)[unlabelled]
    top2 = np.sort(probs, 1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    order = np.argsort(margin, kind="stable")[: pool_factor * n]  # the least sure first
    chosen = k_center_greedy(x, unlabelled[order], labelled, n)
    position = {int(i): k for k, i in enumerate(unlabelled)}
    return [Suggestion(i, float(margin[position[i]]), d, int(probs[position[i]].argmax())) for i, d in chosen]
