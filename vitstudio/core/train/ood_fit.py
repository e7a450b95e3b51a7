"""The end of every run: its out-of-distribution bank (core/models/ood.py), from the pooled features of its training
images (the bank) and of its validation images (the threshold), written beside the weights."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from vitstudio.core.inference import decoded_batches, pooled_and_logits
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models import ood
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.train.ood_separation import measure_separation


def features_of(loaded: LoadedModel, paths: Sequence[str | Path], batch_size: int = 32,
                cancel: CancelToken | None = None, what: str = "images") -> Iterator[Progress]:
    """Generator: yields Progress, returns the (n, D) pooled features of the readable files (unreadable skipped)."""
    rows, done = [], 0
    for batch in decoded_batches(loaded, [str(p) for p in paths], batch_size, cancel):
        if batch.tensor is not None:
            rows.append(pooled_and_logits(loaded, batch.tensor)[0].numpy())
        done += len(batch.items)
        yield Progress(done, len(paths), f"Features of the {what}")
    width = getattr(loaded.model, "num_features", 0)
    return np.concatenate(rows) if rows else np.zeros((0, width), np.float32)


def describe_images(paths: Sequence[str | Path], classes: Sequence[str], sample: int = 32) -> str:
    """The training images in a few words, e.g. "32×32 grey images of 0–9" or "colour photos of ants, bees"."""
    from PIL import Image

    sizes, grey = set(), True
    for path in list(paths)[:sample]:
        try:
            with Image.open(path) as img:
                sizes.add(img.size)
                rgb = np.asarray(img.convert("RGB").resize((16, 16)), np.int16)
        except OSError:
            continue
        grey = grey and int(np.abs(rgb - rgb.mean(axis=2, keepdims=True)).max()) <= 8
    size = f"{next(iter(sizes))[0]}×{next(iter(sizes))[1]} " if len(sizes) == 1 else ""
    return f"{size}{'grey' if grey else 'colour'} images of {ood.name_classes(classes)}"


def write_ood_bank(loaded: LoadedModel, train: Sequence[tuple[Path, int]], val: Sequence[tuple[Path, int]],
                   classes: Sequence[str], out: Path, batch_size: int = 32, cancel: CancelToken | None = None,
                   description: str | None = None, seed: int = 0) -> Iterator[Progress]:
    """Generator: the run's bank from (at most ood.MAX_BANK_ROWS of) its training images, thresholded on its
    validation images, with how well its score separates them from outside images; returns the OODBank it wrote
    to `out`."""
    train_paths = [p for p, _ in train]
    if len(train_paths) > ood.MAX_BANK_ROWS:  # only the rows the bank keeps are computed
        keep = np.random.default_rng(seed).choice(len(train_paths), ood.MAX_BANK_ROWS, replace=False)
        train_paths = [train_paths[i] for i in sorted(keep)]
    train_features = yield from features_of(loaded, train_paths, batch_size, cancel, "training images")
    val_features = yield from features_of(loaded, [p for p, _ in val], batch_size, cancel, "validation images")
    bank = ood.fit_bank(train_features, val_features, description or describe_images(train_paths, classes),
                        seed=seed)
    val_paths = [p for p, _ in val]
    separation = yield from measure_separation(loaded, bank, val_paths, bank.scores(val_features), classes, seed,
                                               cancel)
    bank = dataclasses.replace(bank, separation=separation)
    ood.save_bank(out, bank)
    return bank
