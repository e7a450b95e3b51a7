"""Evaluating a classifier on a labelled file list: accuracy, per-class precision/recall/F1, confusion matrix,
misclassified images."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from vitstudio.core.distributed import DistInfo, sum_across
from vitstudio.core.inference import classify_files
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel


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
    """Generator: yields Progress, returns an EvalReport (`report = yield from evaluate(...)`).

    The images go through the same batch classification as `vitstudio predict` (reader threads, per-file errors).
    """
    true, pred, wrong, skipped, done = [], [], [], [], 0
    labels = iter(label for _, label in items)
    for batch in classify_files(loaded, [path for path, _ in items], topk=1, batch_size=batch_size, cancel=cancel):
        for result in batch:
            label = next(labels)  # results come back in input order
            if not result.ok:
                skipped.append((result.path, result.error))
                continue
            true.append(label)
            pred.append(result.indices[0])
            if result.indices[0] != label:
                wrong.append(Misclassified(result.path, label, result.indices[0], result.probs[0]))
        done += len(batch)
        yield Progress(done, len(items), "Evaluating")
    return EvalReport(tuple(classes), confusion_from(classes, true, pred), tuple(wrong), tuple(skipped))


def validation_pass(model: nn.Module, batches, autocast, dist_info: DistInfo) -> tuple[float, float]:
    """(mean loss, accuracy) of one pass over a run's validation batches, summed across processes."""
    model.eval()
    sums, count = [], 0  # per batch (loss sum, correct) kept on the device and read once: no sync per batch
    with torch.inference_mode(), autocast():
        for x, y in batches:
            logits = model(x).float()
            sums.append(torch.stack([nn.functional.cross_entropy(logits, y, reduction="sum").double(),
                                     (logits.argmax(-1) == y).sum().double()]))
            count += len(y)
    loss_sum, correct = torch.stack(sums).sum(0).tolist() if sums else (0.0, 0.0)
    correct = int(correct)
    loss_sum, correct, count = sum_across(dist_info, loss_sum, correct, count)
    return loss_sum / max(1, count), correct / max(1, count)
