"""Every k-fold linear probe of several feature sets (a model's blocks) fitted as one problem.

Each probe is the quick preset's head (`head_fit.fit_linear_head`): mean cross-entropy over its fold's training
images plus l2/2 · ||W||² on features standardised by that training split (the bias not decayed), which is
scikit-learn's LogisticRegression objective with C = 1 / (l2 · n). The probes share no parameter, so the sum of
their objectives has each probe's optimum as its own: one L-BFGS-B (scikit-learn's solver, with its tolerances) over
the stacked weights (sets × folds × classes × (width + 1)) reaches all of them with one batched matmul per
evaluation, where blocks × folds separate fits took longer than reading the features. The standardisation is folded
into the matmul (x·(W/σ)ᵀ + b − (W/σ)·μ), so every fold reads the same feature matrix.

The objective is summed over slices of the images (each slice's logits and what autograd keeps for them, then
its gradient added), so the logits' memory is fixed whatever the folder's size; what a group of sets holds grows
with it only by the features themselves (one float32 copy each, within STACK_BYTES).

The fit runs on one thread (torch's count is per thread; BLAS's only inside the solver): its operations are small,
and on a busy machine waking a second thread for each cost more than the operation (measured: 2 ms per 13k-element
dot product at load 10 on 2 cores).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import numpy as np
import torch

from vitstudio.core.jobs import CancelToken, Progress

L2 = 1e-4  # the quick preset's decay (`fit_linear_head`'s default)
STEPS = 100  # L-BFGS iterations at most (it stops once the gradient or the loss no longer moves)
GTOL = 1e-4  # the largest gradient entry at which the probes count as fitted (scikit-learn's default tol for lbfgs)
FTOL = 64 * np.finfo(float).eps  # relative loss change at which they do (scikit-learn's)
STACK_BYTES = 256 << 20  # the features a group of sets holds at once (float32, centred); more are fitted in groups
SLICE_BYTES = 32 << 20  # one slice of images' logits with autograd's copies: the objective is summed slice by slice


def fold_accuracies(features: Sequence[np.ndarray], labels: np.ndarray, folds: np.ndarray, classes: int,
                    cancel: CancelToken | None = None, l2: float = L2, steps: int = STEPS,
                    rows: int | None = None) -> Generator[Progress, None, np.ndarray]:
    """Generator: (sets, folds) held-out accuracy of a probe per feature set (N, D) and fold, fitted on the other
    folds. Yields Progress per group of sets fitted together (all of a small model's blocks at once). `features`
    needs only len() and [i]: a set is read when its group is fitted. `rows`: images per slice of the objective
    (default: as many as SLICE_BYTES holds)."""
    cancel = cancel or CancelToken()
    labels = np.asarray(labels, np.int64)
    n, width = len(labels), features[0].shape[1]
    group = max(1, STACK_BYTES // max(1, n * 4 * width))  # the float32 features each set of the group keeps
    out = []
    for start in range(0, len(features), group):
        stop = min(start + group, len(features))
        yield Progress(start, len(features), f"Probing blocks {start + 1}–{stop} of {len(features)} "
                       f"({int(folds.max()) + 1} folds each, fitted together)")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # this thread only (OpenMP's count is per thread): see the module's note
        try:
            out.append(_fit(features, range(start, stop), labels, folds, classes, l2, steps, cancel, rows))
        finally:
            torch.set_num_threads(threads)
    yield Progress(len(features), len(features), "Probes done")
    return np.concatenate(out, 0)


def _fit(features: Sequence[np.ndarray], group: range, labels: np.ndarray, folds: np.ndarray, classes: int,
         l2: float, steps: int, cancel: CancelToken, rows: int | None) -> np.ndarray:
    """(sets, folds) held-out accuracy; the probes' weights found by scipy's L-BFGS-B (sklearn's solver for the
    same loss) on the summed objective, its gradient from autograd: the weights in float64, the logits in float32
    (half the time of float64; the loss summed in float64, so the line search still sees its changes)."""
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits  # scikit-learn's dependency

    k, n, sets = int(folds.max()) + 1, len(labels), len(group)
    train = np.stack([folds != f for f in range(k)], 1)  # (N, F) bool
    x, mu, sd = _standardising(features, group, train)
    weights = torch.as_tensor(train / train.sum(0), dtype=torch.float32)  # (N, F): the mean over each training split
    y = torch.as_tensor(labels).view(1, -1, 1, 1)
    shape = (sets, k, classes, x.shape[2] + 1)  # per set, fold and class: the weights (standardised) and bias
    rows = rows or max(256, SLICE_BYTES // (sets * k * classes * 16))  # float32 logits and autograd's ~3 copies
    slices = [slice(lo, min(lo + rows, n)) for lo in range(0, n, rows)]

    def logits(theta: torch.Tensor, part: slice) -> torch.Tensor:  # (sets, rows, F, C), float32
        theta = theta.float()
        scaled = theta[..., :-1] / sd[:, :, None]
        offset = theta[..., -1] - (scaled * mu[:, :, None]).sum(-1)
        flat = torch.bmm(x[:, part], scaled.reshape(sets, -1, x.shape[2]).transpose(1, 2))
        return flat.view(sets, -1, k, classes) + offset[:, None]

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = torch.as_tensor(flat).view(shape).requires_grad_()
        penalty = 0.5 * l2 * theta[..., :-1].pow(2).sum()
        penalty.backward()
        loss = float(penalty.detach())
        for part in slices:  # each slice's gradient added to theta's: its logits freed before the next
            out = logits(theta, part)
            ce = torch.logsumexp(out, -1) - out.gather(-1, y[:, part].expand(*out.shape[:3], 1)).squeeze(-1)
            term = (ce * weights[part]).sum(dtype=torch.float64)
            term.backward()
            loss += float(term.detach())
        return loss, theta.grad.numpy().ravel()

    def check(_):
        cancel.raise_if_cancelled()
        cancel.wait_while_paused()

    with threadpool_limits(1, "blas"):  # L-BFGS-B's own small BLAS calls: one thread (see the module's note)
        fitted = minimize(objective, np.zeros(int(np.prod(shape))), jac=True, method="L-BFGS-B", callback=check,
                          options={"maxiter": steps, "gtol": GTOL, "ftol": FTOL})
    with torch.no_grad():
        theta = torch.as_tensor(fitted.x).view(shape)
        right = np.concatenate([(logits(theta, part).argmax(-1) == y[:, part, :, 0]).numpy() for part in slices],
                               1)  # (sets, N, F)
    held = ~train
    return (right & held[None]).sum(1) / held.sum(0)


def _standardising(features: Sequence[np.ndarray], group: range, train: np.ndarray
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sets, N, D) features less their mean over all images; (sets, F, D) each training split's mean (on the same
    centred features) and standard deviation (1 where a feature is constant), as `head_fit._scaling`. The sets
    `group` of `features` are read one at a time (a memory-mapped block once) into one float32 array, centred there."""
    x = means = stds = None
    for s, index in enumerate(group):
        read = np.asarray(features[index])
        if x is None:
            x = np.empty((len(group), *read.shape), np.float32)
            means, stds = np.empty((2, len(group), train.shape[1], read.shape[1]))
        x[s] = read
        del read  # the next set is read into a freed heap
        x[s] -= x[s].mean(0, dtype=np.float64).astype(np.float32)  # float32 as the fit reads it; sums in float64
        for f in range(train.shape[1]):
            split = x[s][train[:, f]]
            means[s, f], stds[s, f] = split.mean(0, dtype=np.float64), split.std(0, dtype=np.float64)
    as_tensor = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    return torch.from_numpy(x), as_tensor(means), as_tensor(np.where(stds > 1e-6, stds, 1.0))
