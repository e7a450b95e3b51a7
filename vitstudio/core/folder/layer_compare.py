"""What changed where: CKA between every layer of model A and every layer of model B on the same images (a base
model and its fine-tuned run, two architectures). Each model's layer features are read once and cached
(`layer_cache.py`: the prefix token after each block, the mean token for models without one); the matrix is
linear CKA, or minibatch CKA for folders whose features should not be held at once (`analysis/cka.py`)."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass

import numpy as np

from vitstudio.core.analysis.cka import linear_cka_matrix, minibatch_cka_matrix
from vitstudio.core.folder.layer_cache import FEATURE_NOTE, embed_layers
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel


@dataclass(frozen=True)
class LayerCKA:
    matrix: np.ndarray  # (A's blocks, B's blocks) float64
    names: tuple[str, str]  # the two models as shown
    images: int
    minibatch: int | None  # None: linear CKA on all images at once
    errors: tuple[tuple[str, str], ...]

    def to_json(self) -> dict:
        return {"models": list(self.names), "images": self.images, "features": FEATURE_NOTE,
                "estimator": f"minibatch CKA, {self.minibatch} images a batch" if self.minibatch else "linear CKA",
                "rows": "blocks of " + self.names[0], "columns": "blocks of " + self.names[1],
                "cka": [[round(float(v), 6) for v in row] for row in self.matrix]}


def compare_layers(a: LoadedModel, b: LoadedModel, paths: Iterable[str], minibatch: int | None = None,
                   batch_size: int = 32, cancel: CancelToken | None = None
                   ) -> Generator[Progress, None, LayerCKA]:
    """Generator: both models' layers over `paths` (cached), then the CKA of every pair of blocks."""
    paths = list(paths)
    first = yield from embed_layers(a, paths, batch_size, cancel)
    second = yield from embed_layers(b, paths, batch_size, cancel)
    row_of = {p: i for i, p in enumerate(second.paths)}
    shared = [(i, row_of[p]) for i, p in enumerate(first.paths) if p in row_of]
    if len(shared) < 4:
        raise ValueError(f"CKA needs at least 4 images both models read; there are {len(shared)}.")
    ia, ib = (np.asarray(v, np.int64) for v in zip(*shared))
    yield Progress(0, 1, f"CKA of {first.blocks} × {second.blocks} blocks on {len(shared)} images")
    feats_a = [first.block(layer, ia) for layer in range(first.blocks)]
    feats_b = [second.block(layer, ib) for layer in range(second.blocks)]
    matrix = (minibatch_cka_matrix(feats_a, feats_b, minibatch) if minibatch else
              linear_cka_matrix(feats_a, feats_b))
    yield Progress(1, 1, "CKA done")
    errors = dict(first.errors) | dict(second.errors)
    return LayerCKA(matrix, (a.display_name, b.display_name), len(shared), minibatch, tuple(errors.items()))
