"""Optional augmentation of a Teach head (off by default, as Teachable Machine, Lobe and Create ML): the head is also
fitted on the features of `COPIES` augmented views of each training sample — timm's training crop and flip (the
transform `core/train/training_data.train_transform` builds for a fine-tune: `create_transform(is_training=True)`),
at the crop scale of the last-blocks preset, without colour jitter. Validation samples are never augmented, so the
15 % figures compare with the plain head's.

A view is drawn from a seed made of the project's seed, the sample's file and the copy's number, so a refit draws the
same views; their features are kept in memory per model (`_memo`), so a refit after a change computes the new
samples' views only."""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import torch

from vitstudio.core.data.images import read_image
from vitstudio.core.models.devices import to_device
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.teach.recipes import COPIES  # augmented views per training sample (a refit's time counts them)
from vitstudio.core.train.quick import classifier_input

VIEW = dict(scale=(0.5, 1.0), ratio=(3 / 4, 4 / 3), hflip=0.5)  # the last-blocks preset's crop scale and flip
MEMO_SIZE = 20000  # views' features kept (a 768-d float32 row is 3 KB: 60 MB at most)
_memo: OrderedDict = OrderedDict()  # (model uid, file, copy, seed, view) -> (D,) float32


def view_transform(loaded: LoadedModel):
    """timm's training transform at the model's size and normalisation, VIEW's crop and flip, no colour jitter."""
    import timm

    cfg = loaded.data_config
    return timm.data.create_transform(cfg["input_size"], is_training=True, color_jitter=None,
                                      interpolation=cfg["interpolation"], mean=cfg["mean"], std=cfg["std"], **VIEW)


def _view(transform, path: str, copy: int, seed: int) -> torch.Tensor:
    """One augmented view, its draw seeded by (seed, file, copy): python's `random` (timm's crop) and torch's (the
    flip), both put back after (another thread's draws are not made predictable)."""
    digest = hashlib.sha1(f"{seed}\0{path}\0{copy}".encode("utf-8", "surrogateescape")).digest()
    state = random.getstate()
    try:
        random.seed(digest)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int.from_bytes(digest[:8], "little"))
            return transform(read_image(path))
    finally:
        random.setstate(state)


def augmented_features(loaded: LoadedModel, paths: Sequence[str], seed: int = 0, copies: int = COPIES,
                       batch_size: int = 32) -> np.ndarray:
    """(len(paths) · copies, D) float32: what the head reads for each path's `copies` views, path by path."""
    keys = [(loaded.uid, p, k, seed, repr(VIEW)) for p in paths for k in range(copies)]
    missing = [key for key in keys if key not in _memo]
    transform = view_transform(loaded) if missing else None
    for start in range(0, len(missing), batch_size):
        chunk = missing[start:start + batch_size]
        batch = torch.stack([_view(transform, path, copy, seed) for _, path, copy, _, _ in chunk])
        model = loaded.model
        with loaded.lock, torch.inference_mode(), loaded.autocast():
            pooled = model.forward_head(model.forward_features(to_device(batch, loaded.device)), pre_logits=True)
        for key, row in zip(chunk, classifier_input(model, pooled.float().cpu().numpy())):
            _memo[key] = row
    rows = [_memo[key] for key in keys]
    for key in keys:
        _memo.move_to_end(key)
    while len(_memo) > MEMO_SIZE:
        _memo.popitem(last=False)
    return np.stack(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)


def augmenter(loaded: LoadedModel, paths: Sequence[str], labels: np.ndarray, seed: int = 0
              ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """For fit_features: training indices -> (their views' features, their labels), each sample's COPIES views."""
    def augment(train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = augmented_features(loaded, [paths[i] for i in train], seed)
        return x, np.repeat(np.asarray(labels)[train], COPIES)
    return augment
