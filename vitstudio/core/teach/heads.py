"""The two heads a Teach project can be taught with, on cached features (N, D):

- `quick` (the default): the quick preset's linear head (core/train/head_fit.py: L-BFGS full batch, L2 1e-4 on
  standardised features, folded back): one Linear, so the exported model is a plain timm ViT.
- `teachable-machine`: Teachable Machine's head and training, transcribed in torch from
  teachablemachine-community/libraries/image/src/teachable-mobilenet.ts: Dense(100, relu, bias) → Dense(classes,
  softmax, no bias), both kernels VarianceScaling (:303-327; tfjs' defaults: scale 1, fan_in, a normal truncated at
  2σ, σ = √(1/fan_in)), categorical cross-entropy (:335), Adam lr 0.001 (:329; tfjs' epsilon 1e-7), batches of 16
  from a dataset shuffled once and read in the same order every epoch (:242, :345-359 fitDataset), 50 epochs
  (the values the library's own test trains with: test/image.test.ts:194-197, :286-287). A two-layer head has no
  place in a plain timm ViT: it is for comparing the recipes, and export refuses it by name."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import nn

from vitstudio.core.jobs import CancelToken
from vitstudio.core.teach.recipes import TM_BATCH, TM_EPOCHS  # in a torch-free module: the recipe list's time
from vitstudio.core.train.head_fit import fit_linear_head

TM_UNITS, TM_LR, TM_EPSILON = 100, 1e-3, 1e-7
QUICK_L2, QUICK_STEPS = 1e-4, 100  # the quick preset's weight_decay and epochs (core/train/recipes.py)


@dataclass(frozen=True)
class FittedHead:
    """A head on the features: its layers as (weight (out, in), bias (out,) or None), ReLU between them."""

    recipe: str
    layers: tuple[tuple[np.ndarray, np.ndarray | None], ...]
    seconds: float = 0.0

    @cached_property
    def module(self) -> nn.Module:
        """The head as torch layers, built once (a preview applies it to every frame)."""
        mods: list[nn.Module] = []
        for i, (w, b) in enumerate(self.layers):
            linear = nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
            with torch.no_grad():
                linear.weight.copy_(torch.as_tensor(w))
                if b is not None:
                    linear.bias.copy_(torch.as_tensor(b))
            mods += [linear] if i == len(self.layers) - 1 else [linear, nn.ReLU()]
        return mods[0] if len(mods) == 1 else nn.Sequential(*mods)

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """(N, C) float32 softmax of the head on `features` (float32 torch, as the exported model computes)."""
        with torch.inference_mode():
            logits = self.module(torch.as_tensor(np.asarray(features, np.float32)))
            return logits.softmax(-1).numpy()


def fit_quick(x: np.ndarray, y: np.ndarray, num_classes: int, cancel: CancelToken | None = None) -> FittedHead:
    """The quick preset's fitter, run to its end (no validation in the loop: the head is the loss's minimum)."""
    fit = fit_linear_head(x, y, num_classes, l2=QUICK_L2, steps=QUICK_STEPS, opt="lbfgs", lr=1.0, cancel=cancel)
    while True:
        try:
            next(fit)
        except StopIteration as stop:
            head = stop.value
            return FittedHead("quick", ((head.weight, head.bias),))


def _variance_scaling(layer: nn.Linear, generator: torch.Generator) -> None:
    """tfjs VarianceScaling({}) on a Dense kernel: truncated normal, σ = √(1 / max(1, fan_in)), cut at ±2σ."""
    std = math.sqrt(1.0 / max(1, layer.in_features))
    nn.init.trunc_normal_(layer.weight, std=std, a=-2 * std, b=2 * std, generator=generator)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)  # Dense's biasInitializer default


def _categorical_crossentropy(probs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """tfjs' categoricalCrossentropy on softmax outputs: renormalised, clipped to [ε, 1−ε], −Σ y·log p, batch mean."""
    probs = (probs / probs.sum(-1, keepdim=True)).clamp(TM_EPSILON, 1 - TM_EPSILON)
    return -probs.log().gather(1, y[:, None]).mean()


def fit_teachable_machine(x: np.ndarray, y: np.ndarray, num_classes: int, cancel: CancelToken | None = None,
                          seed: int = 0, epochs: int = TM_EPOCHS) -> FittedHead:
    """Teachable Machine's head and its training loop (module docstring), on the features as given."""
    cancel = cancel or CancelToken()
    generator = torch.Generator().manual_seed(seed)
    hidden, out = nn.Linear(x.shape[1], TM_UNITS), nn.Linear(TM_UNITS, num_classes, bias=False)
    _variance_scaling(hidden, generator)
    _variance_scaling(out, generator)
    model = nn.Sequential(hidden, nn.ReLU(), out)
    optimiser = torch.optim.Adam(model.parameters(), lr=TM_LR, eps=TM_EPSILON)
    order = torch.randperm(len(y), generator=generator)  # shuffled once (ts:242), then read in order every epoch
    features = torch.as_tensor(np.asarray(x, np.float32))[order]
    labels = torch.as_tensor(np.asarray(y, np.int64))[order]
    for _ in range(epochs):
        cancel.raise_if_cancelled()
        for start in range(0, len(labels), TM_BATCH):
            batch = slice(start, start + TM_BATCH)
            optimiser.zero_grad()
            _categorical_crossentropy(model(features[batch]).softmax(-1), labels[batch]).backward()
            optimiser.step()
    layers = tuple((m.weight.detach().numpy().copy(), None if m.bias is None else m.bias.detach().numpy().copy())
                   for m in (hidden, out))
    return FittedHead("teachable-machine", layers)


FITTERS = {"quick": fit_quick, "teachable-machine": fit_teachable_machine}
