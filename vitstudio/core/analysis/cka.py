"""Centred kernel alignment between layers (Kornblith et al. 2019), as Raghu et al. 2021 compare ViTs.

Linear CKA of features X (n, p) and Y (n, q) of the same n images:
    CKA = ||Yᶜᵀ Xᶜ||²_F / (||Xᶜᵀ Xᶜ||_F · ||Yᶜᵀ Yᶜ||_F),  with Xᶜ, Yᶜ centred over the images,
the feature-space form of HSIC(K, L) / √(HSIC(K, K) HSIC(L, L)) for K = XXᵀ, L = YYᵀ (the n × n Gram matrices are
never formed). Minibatch CKA (Nguyen et al. 2021) averages the unbiased HSIC estimator (their Eq. 3) over
minibatches of m images, so folders of any size need only m × m Grams; it estimates the same quantity without
the biased estimator's dependence on n (the two differ on small folders).
"""

from __future__ import annotations

import numpy as np


def _centred(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x - x.mean(0, keepdims=True)


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of (n, p) and (n, q) features of the same images (float64)."""
    xc, yc = _centred(x), _centred(y)
    cross = np.linalg.norm(yc.T @ xc) ** 2
    denominator = np.linalg.norm(xc.T @ xc) * np.linalg.norm(yc.T @ yc)
    return float(cross / denominator) if denominator > 0 else 0.0


def linear_cka_matrix(a: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray:
    """(len(a), len(b)) linear CKA of every layer of A against every layer of B."""
    ac, bc = [_centred(x) for x in a], [_centred(y) for y in b]
    self_a = [np.linalg.norm(x.T @ x) for x in ac]
    self_b = [np.linalg.norm(y.T @ y) for y in bc]
    out = np.zeros((len(a), len(b)))
    for i, x in enumerate(ac):
        for j, y in enumerate(bc):
            denominator = self_a[i] * self_b[j]
            out[i, j] = np.linalg.norm(y.T @ x) ** 2 / denominator if denominator > 0 else 0.0
    return out


def unbiased_hsic(k: np.ndarray, g: np.ndarray) -> float:
    """Nguyen et al. 2021, Eq. 3 (Song et al. 2012): Grams with their diagonals set to 0, n > 3."""
    n = len(k)
    ones = np.ones(n)
    trace = np.sum(k * g.T)
    middle = (ones @ k @ ones) * (ones @ g @ ones) / ((n - 1) * (n - 2))
    last = 2 * (ones @ k @ g @ ones) / (n - 2)
    return float((trace + middle - last) / (n * (n - 3)))


def _gram(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    k = x @ x.T
    np.fill_diagonal(k, 0.0)
    return k


def minibatch_cka_matrix(a: list[np.ndarray], b: list[np.ndarray], batch: int) -> np.ndarray:
    """(len(a), len(b)) minibatch CKA: unbiased HSIC summed over consecutive batches of `batch` images (a last
    batch of fewer than 4 images is left out: the estimator needs n > 3)."""
    n = len(a[0])
    if batch < 4:
        raise ValueError(f"A CKA minibatch needs at least 4 images, not {batch}.")
    starts = [s for s in range(0, n, batch) if min(n, s + batch) - s > 3]
    if not starts:
        raise ValueError(f"Minibatch CKA needs at least 4 images; there are {n}.")
    cross = np.zeros((len(a), len(b)))
    self_a, self_b = np.zeros(len(a)), np.zeros(len(b))
    for s in starts:
        ka = [_gram(x[s:s + batch]) for x in a]
        kb = [_gram(y[s:s + batch]) for y in b]
        self_a += [unbiased_hsic(k, k) for k in ka]
        self_b += [unbiased_hsic(k, k) for k in kb]
        cross += [[unbiased_hsic(k, g) for g in kb] for k in ka]
    return cross / np.sqrt(np.maximum(np.outer(self_a, self_b), 1e-300))
