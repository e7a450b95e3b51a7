"""Teachable Machine's validation split, transcribed: each class shuffled on its own, its last ⌈15 % · n⌉ samples held
out (teachablemachine-community, libraries/image/src/teachable-mobilenet.ts:32 VALIDATION_FRACTION = 0.15 and
:209-243 convertToTfDataset: Fisher-Yates per class, numValidation = Math.ceil(VALIDATION_FRACTION * classLength),
train = slice(0, numTrain), validation = slice(numTrain)), in float64 as JavaScript computes it, so the counts are
Teachable Machine's and its figures compare: 1 sample holds out 1 (none is left to learn from), 7 hold out 2."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

VALIDATION_FRACTION = 0.15


@dataclass(frozen=True)
class TeachSplit:
    train: np.ndarray  # (n_train,) int64 sample indices, class by class in their shuffled order
    val: np.ndarray  # (n_val,) int64


def validation_count(n: int) -> int:
    return math.ceil(VALIDATION_FRACTION * n)


def teachable_split(labels: np.ndarray, seed: int = 0) -> TeachSplit:
    """Indices of `labels` (N,) split per class; the shuffle is numpy's (seeded), not seedrandom's, so which samples
    are held out differs from the browser's, never how many."""
    rng = np.random.default_rng(seed)
    train, val = [], []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        keep = len(members) - validation_count(len(members))
        train.append(members[:keep])
        val.append(members[keep:])
    return TeachSplit(_joined(train), _joined(val))


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
