"""The results table of a folder: one row per image with its prediction, confidence, margin and given label
(the name of its folder), filters over it and CSV export. Plain numpy columns, so 100k rows sort and filter fast."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from vitstudio.core.files import SafeCsvWriter, open_csv
from vitstudio.core.folder.embedcache import FolderEmbeddings


@dataclass(frozen=True)
class FolderResults:
    paths: tuple[str, ...]
    given: tuple[str, ...]  # the image's folder name ('' for images given one by one)
    predicted: np.ndarray  # (N,) class index
    confidence: np.ndarray  # (N,) top-1 probability
    margin: np.ndarray  # (N,) top-1 minus top-2 probability
    labels: tuple[str, ...]  # the model's class names

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def has_predictions(self) -> bool:
        """False for a headless model (features only, e.g. a CLIP-style model before it is given classes): its
        rows have no prediction, confidence or margin, but the map, similar images and duplicates still work."""
        return bool(self.labels)

    @cached_property
    def name_rank(self) -> np.ndarray:
        """(N,) each row's place in the folder sorted by file name (stable): the table's default order, made once
        per results (the scan job makes it: 100k names sorted are ~0.3 s the GUI thread does not spend)."""
        rank = np.empty(len(self), np.int64)
        rank[np.argsort(np.asarray([os.path.basename(p) for p in self.paths]), kind="stable")] = np.arange(len(self))
        return rank

    def predicted_label(self, i: int) -> str:
        return self.labels[int(self.predicted[i])] if self.has_predictions else ""

    def predicted_labels(self) -> np.ndarray:
        """(N,) the predicted class name of every row ('' without predictions)."""
        return np.asarray(self.labels)[self.predicted] if self.has_predictions else np.full(len(self), "")

    def correct(self) -> np.ndarray:
        """(N,) 1 where the given label is the prediction, 0 where it is another class the model knows, -1 where
        the folder name is not one of the model's classes (nothing to compare)."""
        known = {name: i for i, name in enumerate(self.labels)}
        names, codes = self.given_codes
        given = np.asarray([known.get(g, -1) for g in names.tolist()], np.int64)[codes]  # per folder, then per row
        return np.where(given < 0, -1, (given == self.predicted).astype(int))

    @cached_property
    def given_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct given labels sorted, each row's index into them): per-row strings compared once, in the
        scan job (the table, the gallery and Counts then work on ints: 100k rows, ~40 ms each before)."""
        names, codes = np.unique(np.asarray(self.given, str), return_inverse=True)
        return names, codes.reshape(-1).astype(np.int64)

    def select(self, predicted: str | None = None, min_confidence: float = 0.0, max_confidence: float = 1.0,
               correct: bool | None = None, given: str | None = None) -> np.ndarray:
        """Indices of the rows that pass every filter given."""
        if not self.has_predictions:  # nothing predicted: the prediction and confidence filters have nothing to act on
            return np.nonzero(self._given_and_correct(np.ones(len(self), bool), given, correct))[0]
        keep = (self.confidence >= min_confidence) & (self.confidence <= max_confidence)
        if predicted is not None:
            keep &= self.predicted == self.labels.index(predicted)
        return np.nonzero(self._given_and_correct(keep, given, correct))[0]

    def _given_and_correct(self, keep: np.ndarray, given: str | None, correct: bool | None) -> np.ndarray:
        if given is not None:
            keep &= np.asarray([g == given for g in self.given])
        if correct is not None:
            keep &= self.correct() == int(correct)
        return keep

    def relocated(self, moves: dict[str, str]) -> FolderResults:
        """The same rows after files moved ({old path: new path}, e.g. a label-review move or its undo): each moved
        file under its new path, its given label its new folder's name (a loose file stays without one)."""
        if not any(p in moves for p in self.paths):
            return self
        paths = tuple(moves.get(p, p) for p in self.paths)
        given = tuple(os.path.basename(os.path.dirname(new)) if p in moves and g else g
                      for p, new, g in zip(self.paths, paths, self.given))
        return replace(self, paths=paths, given=given)

    def write_csv(self, file: str | Path, rows: np.ndarray | None = None) -> int:
        rows = np.arange(len(self)) if rows is None else rows
        correct = self.correct()
        with open_csv(file) as f:
            writer = SafeCsvWriter(f)
            writer.writerow(["path", "given", "predicted", "confidence", "margin", "correct"])
            for i in rows:
                scores = [f"{self.confidence[i]:.6f}", f"{self.margin[i]:.6f}"] if self.has_predictions else ["", ""]
                writer.writerow([self.paths[i], self.given[i], self.predicted_label(i), *scores,
                                 {1: "yes", 0: "no", -1: ""}[int(correct[i])]])
        return len(rows)


def _class_folder(parent: str, roots: list[str]) -> str:
    """The class an image in folder `parent` is given: the folder right under the root it was opened from
    (root/dog/sub/deeper/x.jpg is a dog, as training's scan has it, not a "deeper"); none for an image directly in a
    root; outside every root, its own folder's name."""
    folder = os.path.normpath(os.path.abspath(parent))
    for root in roots:  # the longest first: a root inside another one wins
        if folder == root:
            return ""
        if folder.startswith(root.rstrip(os.sep) + os.sep):
            return folder[len(root.rstrip(os.sep)) + 1:].split(os.sep, 1)[0]
    return os.path.basename(folder)


def folder_results(embedded: FolderEmbeddings, roots: list[str] | None = None) -> FolderResults:
    """Rows for every embedded image; the given label is the class folder it is in under the root it was opened
    from, none for images directly in a root (dropped, with no class folder)."""
    plain = sorted({os.path.normpath(os.path.abspath(r)) for r in roots or []}, key=len, reverse=True)
    parents = [os.path.dirname(p) for p in embedded.paths]
    classes = {d: _class_folder(d, plain) for d in set(parents)}  # once per folder: 100k paths, a few folders
    given = tuple(classes[d] for d in parents)
    if not embedded.labels:  # a headless model: its "logits" are features, not class scores
        nothing = np.full(len(embedded.paths), np.nan, np.float32)
        return FolderResults(embedded.paths, given, np.full(len(embedded.paths), -1), nothing, nothing, ())
    probs = embedded.probabilities()
    order = np.argsort(-probs, axis=1)
    top1 = probs[np.arange(len(probs)), order[:, 0]] if len(probs) else np.zeros(0, np.float32)
    top2 = probs[np.arange(len(probs)), order[:, 1]] if probs.shape[1:] and probs.shape[1] > 1 else np.zeros_like(top1)
    return FolderResults(embedded.paths, given, order[:, 0] if len(probs) else np.zeros(0, int), top1, top1 - top2,
                         embedded.labels)
