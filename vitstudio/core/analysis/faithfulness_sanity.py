"""The model-randomisation sanity check (Adebayo et al., "Sanity Checks for Saliency Maps", NeurIPS 2018).

Cascading randomisation from the top: the classifier head first, then the trunk blocks from the last to the
first, each step keeping the previous ones randomised. After every step each method's map of each image is compared
with the trained model's map by Spearman's rank correlation (scipy). A map that explains what the model learned
must change as the weights that learned it are destroyed; a method whose maps still correlate strongly once every
block is random (mean ρ ≥ `INSENSITIVE`) is marked insensitive to the model.

Re-drawn weights follow timm's ViT init: every matrix / kernel from a truncated normal (σ 0.02), biases 0, the
scales of normalisation layers 1, other vectors (layer scales, tokens) from the same normal. Methods that explain a
class explain the trained model's top-1 class at every step, so only the weights change.
"""

from __future__ import annotations

import copy
from collections.abc import Generator
from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import nn

from vitstudio.core.analysis.faithfulness import method_map, top1
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import trunk_blocks

INSENSITIVE = 0.5  # mean Spearman ρ with the trained model's map, everything randomised, at or above which we warn


@dataclass(frozen=True)
class SanityCheck:
    steps: tuple[str, ...]  # what is random after each step, cumulatively: "head", "block 11", …, "block 0"
    correlation: dict[str, np.ndarray]  # method -> (images, steps) Spearman ρ with the trained model's map
    errors: dict[str, str]  # method -> why it could not be checked

    def mean_curve(self, method: str) -> np.ndarray:
        """(steps,) mean ρ over the images (images whose maps were constant, ρ undefined, left out)."""
        return np.nanmean(self.correlation[method], axis=0)

    @property
    def insensitive(self) -> tuple[str, ...]:
        """Methods whose maps barely change when every weight has been re-drawn."""
        return tuple(m for m in self.correlation if self.mean_curve(m)[-1] >= INSENSITIVE)


def redraw(module: nn.Module, generator: torch.Generator) -> None:
    """Re-draw every parameter of `module` in place (see the module doc for the distributions)."""
    with torch.no_grad():
        for owner in module.modules():
            is_norm = "Norm" in type(owner).__name__
            for name, p in owner.named_parameters(recurse=False):
                if p.ndim == 1 and name == "bias":
                    p.zero_()
                elif p.ndim == 1 and is_norm:
                    p.fill_(1.0)
                else:
                    fresh = torch.randn(p.shape, generator=generator).clamp_(-2, 2) * 0.02
                    p.copy_(fresh.to(p.device, p.dtype))


def _wrapped(loaded: LoadedModel, model: nn.Module) -> LoadedModel:
    """The same LoadedModel around another module (its own uid: results are never mistaken for the trained one's)."""
    keep = {f.name: getattr(loaded, f.name) for f in fields(loaded) if f.init and f.name not in ("model", "uid")}
    return LoadedModel(model=model, **keep)


def cascade(loaded: LoadedModel, seed: int = 0) -> Generator[tuple[str, LoadedModel], None, None]:
    """(step name, model) with the head, then each block from the top, cumulatively re-drawn, on one copy."""
    with loaded.lock:  # never copied halfway through someone else's capture (hooks and flags are on the module)
        model = copy.deepcopy(loaded.model).eval()
    generator = torch.Generator().manual_seed(seed)
    head = model.get_classifier() if hasattr(model, "get_classifier") else None
    if isinstance(head, nn.Module) and any(True for _ in head.parameters()):
        redraw(head, generator)
        yield "head", _wrapped(loaded, model)
    blocks = trunk_blocks(model)
    for i in reversed(range(len(blocks))):
        redraw(blocks[i].block, generator)
        yield f"block {i}", _wrapped(loaded, model)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    a, b = np.ravel(a), np.ravel(b)
    if np.ptp(a) == 0 or np.ptp(b) == 0:  # a constant map has no ranking
        return float("nan")
    return float(spearmanr(a, b).statistic)


@dataclass(frozen=True)
class SanityProgress:
    done: int
    total: int
    step: str


def sanity_check(loaded: LoadedModel, inputs: list[torch.Tensor], methods: list[str], seed: int = 0, cancel=None,
                 **given) -> Generator[SanityProgress, None, SanityCheck]:
    """Spearman ρ between each method's map on the trained model and on the cascade's models, for each
    preprocessed image in `inputs` (each (1, 3, H, W)); yields progress after each step."""
    targets = [top1(loaded, x) for x in inputs]
    trained, errors = {}, {}
    for method in methods:
        try:
            trained[method] = [method_map(loaded, x, method, t, **given) for x, t in zip(inputs, targets)]
        except (ValueError, RuntimeError) as exc:
            errors[method] = str(exc)
    steps, columns = [], []
    total = len(trunk_blocks(loaded.model)) + 1
    for step, model in cascade(loaded, seed):
        if cancel is not None and cancel.cancelled:
            break
        columns.append({m: [spearman(maps[i], method_map(model, x, m, t, **given))
                            for i, (x, t) in enumerate(zip(inputs, targets))] for m, maps in trained.items()})
        steps.append(step)
        yield SanityProgress(len(steps), total, step)
    correlation = {m: np.array([col[m] for col in columns]).T.reshape(len(inputs), len(columns)) for m in trained}
    return SanityCheck(tuple(steps), correlation, errors)


def sanity_job(cancel, loaded: LoadedModel, image, method: str) -> SanityCheck:
    """The GUI's view job: the cascade for one method on one PIL image."""
    gen = sanity_check(loaded, [loaded.to_tensor(loaded.crop(image))[None]], [method], cancel=cancel)
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value
