"""Teachable Machine's validation split, transcribed: each class shuffled on its own, its last ⌈15 % · n⌉ samples held
out (teachablemachine-community, libraries/image/src/teachable-mobilenet.ts:32 VALIDATION_FRACTION = 0.15 and
:209-243 convertToTfDataset: Fisher-Yates per class, numValidation = Math.ceil(VALIDATION_FRACTION * classLength),
train = slice(0, numTrain), validation = slice(numTrain)), in float64 as JavaScript computes it, so the counts are
Teachable Machine's and its figures compare: 1 sample holds out 1 (none is left to learn from), 7 hold out 2.

Frames held to record are a few milliseconds apart: split one by one, nearly every held-out frame has a twin in
training and validation measures recall of the recording, not the head (6 of 7 right vs ~60 % on other frames). With
`groups` (sample_groups: one per recording, near-duplicates joined) whole groups are held out instead, ⌈15 %⌉ of
each class or the next group past it, and one group of every class always stays to learn from."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

VALIDATION_FRACTION = 0.15
MIN_HELD_OUT = 5  # fewer held-out samples of a class than this: its accuracy moves in steps of 20 % or more


@dataclass(frozen=True)
class TeachSplit:
    train: np.ndarray  # (n_train,) int64 sample indices, class by class in their shuffled order
    val: np.ndarray  # (n_val,) int64


def validation_count(n: int) -> int:
    return math.ceil(VALIDATION_FRACTION * n)


def teachable_split(labels: np.ndarray, seed: int = 0, groups: np.ndarray | None = None) -> TeachSplit:
    """Indices of `labels` (N,) split per class; the shuffle is numpy's (seeded), not seedrandom's, so which samples
    are held out differs from the browser's, never how many. `groups` (N,): samples of one group on one side."""
    rng = np.random.default_rng(seed)
    train, val = [], []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        keep = len(members) - validation_count(len(members))
        if groups is not None:
            held = _held_groups(groups[members], validation_count(len(members)))
            train.append(members[~held])
            val.append(members[held])
            continue
        train.append(members[:keep])
        val.append(members[keep:])
    return TeachSplit(_joined(train), _joined(val))


def _held_groups(groups: np.ndarray, wanted: int) -> np.ndarray:
    """(n,) bool: whole groups taken from the end of the shuffled class until `wanted` samples are held out, one
    group always left to learn from."""
    order = list(dict.fromkeys(groups.tolist()))  # the groups in the shuffled order of their first sample
    held, count = [], 0
    for group in reversed(order[1:]):
        if count >= wanted:
            break
        held.append(group)
        count += int((groups == group).sum())
    return np.isin(groups, held)


def sample_groups(paths: list[str], recording_of: dict[str, str]) -> np.ndarray:
    """(N,) int64: a group per recording (`recording_of`: file name -> its hold), joined with the near-duplicate
    groups the Folder tab finds (core/folder/duplicates.find_groups: perceptual hashes ≤ 10 bits apart and 16×16
    thumbnails correlating ≥ 0.99, both, at its fixed cuts), so near-identical frames added as files stay together
    too. The model's features are not a signal here: they put a whole class within cosine 0.99."""
    from pathlib import Path

    from vitstudio.core.folder.duplicates import find_groups
    from vitstudio.core.folder.fingerprintcache import cached_fingerprints

    parent = list(range(len(paths)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(members: list[int]) -> None:
        for other in members[1:]:
            parent[root(other)] = root(members[0])

    by_recording: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        if Path(path).name in recording_of:
            by_recording.setdefault(recording_of[Path(path).name], []).append(i)
    for members in by_recording.values():
        join(members)
    if len(paths) > 1:
        index = {p: i for i, p in enumerate(paths)}
        found, _, _ = find_groups(paths, cached_fingerprints(paths), fixed_cuts=True)
        for group in found:
            join([index[p] for p in (*group.paths, *(c for cs in group.copies.values() for c in cs)) if p in index])
    return np.asarray([root(i) for i in range(len(paths))], np.int64)


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
