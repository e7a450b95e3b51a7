"""A linear classifier fitted on fixed features, full batch: what the `quick` preset trains (and `suggest` refits).

The features are standardised for the optimiser (L-BFGS converges in tens of steps on well-scaled inputs) and the
scaling is folded back into the weights at the end, so the head works on the raw pooled features the model gives.
The loss is the mean cross-entropy (class-weighted when balanced) plus l2/2 · ||W||² (the bias is not decayed).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vitstudio.core.jobs import CancelToken

HEAD_OPTIMISERS = ("lbfgs", "adamw", "adam")
LBFGS_HISTORY = 20  # the curvature pairs L-BFGS keeps (its state: two vectors per pair, each the head's size)


@dataclass(frozen=True)
class HeadStep:
    """One full-batch step: every training feature seen once (so one step is one epoch of the other presets)."""

    step: int
    train_loss: float
    train_acc: float
    val_loss: float
    val_acc: float
    seconds: float
    best: bool


@dataclass(frozen=True)
class LinearHead:
    weight: np.ndarray  # (C, D) float32, on the raw features
    bias: np.ndarray  # (C,) float32
    step: int  # the step these weights come from (the last)

    def logits(self, features: np.ndarray) -> np.ndarray:
        return np.asarray(features, np.float32) @ self.weight.T + self.bias


def balanced_weights(labels: np.ndarray, num_classes: int) -> torch.Tensor:
    """n / (C · n_c) per class (sklearn's "balanced"); a class without examples weighs 0."""
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    weights = np.where(counts > 0, counts.sum() / (num_classes * np.maximum(counts, 1)), 0.0)
    return torch.as_tensor(weights, dtype=torch.float32)


def _scaling(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(0)
    std = x.std(0)
    return mean, np.where(std > 1e-6, std, 1.0)  # a constant feature is left unscaled


def _metrics(layer: nn.Linear, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    if len(y) == 0:
        return float("nan"), float("nan")
    with torch.no_grad():
        logits = layer(x)
        return float(nn.functional.cross_entropy(logits, y)), float((logits.argmax(1) == y).float().mean())


def fit_linear_head(train_x: np.ndarray, train_y: np.ndarray, num_classes: int, val_x: np.ndarray | None = None,
                    val_y: np.ndarray | None = None, l2: float = 1e-4, steps: int = 50, opt: str = "lbfgs",
                    lr: float = 1.0, balance: bool = False, init: tuple[np.ndarray, np.ndarray] | None = None,
                    cancel: CancelToken | None = None) -> Generator[HeadStep, None, LinearHead]:
    """Generator: yields a HeadStep per full-batch step, returns the LinearHead of the last step. L-BFGS stops
    early once the loss no longer changes.

    The head kept is the minimum of the regularised loss, not the step that scored best on validation: with a
    convex loss the optimum is well defined, and a step picked on validation would make its score optimistic."""
    if opt not in HEAD_OPTIMISERS:
        raise ValueError(f"A head on cached features is fitted with {', '.join(HEAD_OPTIMISERS)}, not '{opt}'.")
    cancel = cancel or CancelToken()
    mean, std = _scaling(np.asarray(train_x, np.float64))

    def scaled(a):
        return torch.as_tensor(((np.asarray(a, np.float64) - mean) / std).astype(np.float32))

    x, y = scaled(train_x), torch.as_tensor(np.asarray(train_y, np.int64))
    has_val = val_x is not None and len(val_x) > 0
    vx = scaled(val_x) if has_val else x[:0]
    vy = torch.as_tensor(np.asarray(val_y, np.int64)) if has_val else y[:0]
    layer = _scaled_layer(x.shape[1], num_classes, init, mean, std)
    weight = balanced_weights(train_y, num_classes) if balance else None

    def objective() -> torch.Tensor:
        loss = nn.functional.cross_entropy(layer(x), y, weight=weight)
        return loss + 0.5 * l2 * layer.weight.pow(2).sum()

    optimiser = _optimiser(layer, opt, lr)

    def closure():
        optimiser.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    best_acc, previous, step = -1.0, None, -1
    for step in range(steps):
        cancel.raise_if_cancelled()
        cancel.wait_while_paused()
        started = time.perf_counter()
        optimiser.step(closure)
        with torch.no_grad():
            total = float(objective())
        train_loss, train_acc = _metrics(layer, x, y)
        val_loss, val_acc = _metrics(layer, vx, vy) if has_val else (train_loss, train_acc)
        improved = val_acc > best_acc
        best_acc = max(best_acc, val_acc)
        yield HeadStep(step, train_loss, train_acc, val_loss if has_val else float("nan"),
                       val_acc if has_val else float("nan"), time.perf_counter() - started, improved)
        if opt == "lbfgs" and previous is not None and abs(previous - total) <= 1e-7 * max(1.0, abs(total)):
            break  # converged: the remaining steps would not move the weights
        previous = total
    return _unscaled(layer.weight.detach(), layer.bias.detach(), step, mean, std)


def _scaled_layer(width: int, num_classes: int, init, mean: np.ndarray, std: np.ndarray) -> nn.Linear:
    """The layer the optimiser moves, on standardised features: zeros, or `init` (W, b on raw features) rewritten
    as the same function of the scaled inputs (W' = W·σ, b' = b + W·μ)."""
    layer = nn.Linear(width, num_classes)
    with torch.no_grad():
        if init is None:
            layer.weight.zero_()
            layer.bias.zero_()
        else:
            w, b = (np.asarray(a, np.float64) for a in init)
            layer.weight.copy_(torch.as_tensor(w * std))
            layer.bias.copy_(torch.as_tensor(b + w @ mean))
    return layer


def _optimiser(layer: nn.Linear, opt: str, lr: float) -> torch.optim.Optimizer:
    if opt == "lbfgs":  # one iteration per step() call, so every step can be reported and cancelled
        return torch.optim.LBFGS(layer.parameters(), lr=lr, max_iter=1, history_size=LBFGS_HISTORY,
                                 line_search_fn="strong_wolfe")
    # a plain full-batch gradient method: the L2 term is in the objective, so no decoupled decay
    return (torch.optim.AdamW if opt == "adamw" else torch.optim.Adam)(layer.parameters(), lr=lr, weight_decay=0.0)


def _unscaled(weight: torch.Tensor, bias: torch.Tensor, step: int, mean: np.ndarray, std: np.ndarray) -> LinearHead:
    """The head on raw features: W = W'/σ, b = b' − W·μ (float64 while folding)."""
    w = weight.double().numpy() / std
    b = bias.double().numpy() - w @ mean
    return LinearHead(w.astype(np.float32), b.astype(np.float32), step)
