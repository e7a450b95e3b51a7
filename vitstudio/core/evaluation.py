"""Evaluating a classifier on a labelled file list: accuracy, per-class precision/recall/F1, confusion matrix,
misclassified images."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .images import ImageReadError, read_image
from .jobs import CancelToken, Progress
from .model import LoadedModel


@dataclass(frozen=True)
class Misclassified:
    path: str
    true: int
    predicted: int
    prob: float


@dataclass(frozen=True)
class EvalReport:
    classes: tuple[str, ...]
    confusion: np.ndarray  # (C, C): rows true class, columns predicted
    misclassified: tuple[Misclassified, ...]
    skipped: tuple[tuple[str, str], ...]

    @property
    def accuracy(self) -> float:
        total = self.confusion.sum()
        return float(np.trace(self.confusion) / total) if total else 0.0

    def per_class(self) -> list[dict]:
        """precision, recall, f1 and support for every class (0 where undefined)."""
        rows = []
        for i, name in enumerate(self.classes):
            tp = float(self.confusion[i, i])
            predicted, actual = float(self.confusion[:, i].sum()), float(self.confusion[i].sum())
            p = tp / predicted if predicted else 0.0
            r = tp / actual if actual else 0.0
            rows.append({"class": name, "precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0,
                         "support": int(actual)})
        return rows

    @classmethod
    def from_json(cls, doc: dict) -> EvalReport:
        return cls(tuple(doc["classes"]), np.asarray(doc["confusion"], dtype=np.int64),
                   tuple(Misclassified(**m) for m in doc["misclassified"]), tuple(tuple(s) for s in doc["skipped"]))

    def to_json(self) -> dict:
        return {"accuracy": self.accuracy, "classes": list(self.classes), "confusion": self.confusion.tolist(),
                "per_class": self.per_class(),
                "misclassified": [m.__dict__ for m in self.misclassified], "skipped": [list(s) for s in self.skipped]}


def confusion_from(classes: Sequence[str], true: Sequence[int], predicted: Sequence[int]) -> np.ndarray:
    matrix = np.zeros((len(classes), len(classes)), dtype=np.int64)
    np.add.at(matrix, (np.asarray(true, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return matrix


def evaluate(loaded: LoadedModel, items: Sequence[tuple[Path, int]], classes: Sequence[str], batch_size: int = 32,
             cancel: CancelToken | None = None) -> Iterator[Progress]:
    """Generator: yields Progress, returns an EvalReport (`report = yield from evaluate(...)`)."""
    true, pred, probs, paths, skipped, batch = [], [], [], [], [], []

    def flush():
        if not batch:
            return
        x = torch.stack([t for t, _, _ in batch])
        with loaded.lock, torch.inference_mode(), loaded.autocast():
            p = loaded.model(x.to(loaded.device)).float().softmax(-1).cpu()
        conf, idx = p.max(-1)
        for (_, label, path), c, i in zip(batch, conf.tolist(), idx.tolist()):
            true.append(label)
            pred.append(i)
            probs.append(c)
            paths.append(path)
        batch.clear()

    for n, (path, label) in enumerate(items, 1):
        if cancel is not None:
            cancel.raise_if_cancelled()
        try:
            batch.append((loaded.to_tensor(loaded.crop(read_image(path))), label, str(path)))
        except ImageReadError as exc:
            skipped.append((str(path), exc.reason))
        if len(batch) >= batch_size:
            flush()
        if n % batch_size == 0 or n == len(items):
            yield Progress(n, len(items), "Evaluating")
    flush()
    wrong = tuple(Misclassified(p, t, q, c) for p, t, q, c in zip(paths, true, pred, probs) if t != q)
    return EvalReport(tuple(classes), confusion_from(classes, true, pred), wrong, tuple(skipped))
