"""Labels made in the app for a folder of unlabelled images: kept in a labels file (`path,label` CSV, the format
`--labels` reads), by default in the app's data folder keyed by the image folder (the folder itself is never
written to), and a quick head fitted on the cached features of what is labelled so far, to colour every image by
its prediction at once.

The head is the one `suggest` fits (L-BFGS on L2-normalised pooled features), so the map shows what the next
suggestions are computed from."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vitstudio.core.data.dataset_scan import DatasetError
from vitstudio.core.data.labels_file import read_labels_file
from vitstudio.core.files import SafeCsvWriter, atomic_write_bytes, dataset_dir


def default_labels_path(folder: str | Path) -> Path:
    return dataset_dir(folder) / "labels.csv"


def load_labels(path: str | Path) -> dict[str, str]:
    """{absolute image path: label} of a labels file; {} when there is none yet."""
    if not Path(path).is_file():
        return {}
    return {str(p): label for p, label in read_labels_file(path).labelled}


def save_labels(path: str | Path, labels: dict[str, str], paths: Sequence[str]) -> None:
    """Every image of the folder, labelled or not (an empty label), absolute paths; written atomically."""
    out = io.StringIO()
    writer = SafeCsvWriter(out, lineterminator="\n")
    writer.writerow(["path", "label"])
    listed = set()
    for p in list(paths) + [p for p in labels if p not in set(paths)]:
        if p not in listed:
            listed.add(p)
            writer.writerow([p, labels.get(p, "")])
    atomic_write_bytes(Path(path), out.getvalue().encode("utf-8", "surrogateescape"))  # a non-UTF-8 name: its bytes


def class_order(labels: dict[str, str]) -> list[str]:
    """The classes in the order they were first given (keys 1–9 follow it): a new class takes the next key. Sorted
    by name, adding a class could move another to a new key under the user's fingers."""
    return list(dict.fromkeys(labels.values()))


@dataclass(frozen=True)
class HeadMap:
    classes: tuple[str, ...]
    predicted: np.ndarray  # (N,) class index per image
    confidence: np.ndarray  # (N,) its probability
    labelled: int


def fit_label_head(features: np.ndarray, paths: Sequence[str], labels: dict[str, str]) -> HeadMap:
    """A head on the labelled images' features and its prediction for every image; needs two classes."""
    from vitstudio.core.train.suggest import fit_probabilities

    classes = class_order(labels)
    if len(classes) < 2:
        raise DatasetError("Label images of at least two classes to train (one class has nothing to tell apart).")
    index = {c: i for i, c in enumerate(classes)}
    y = np.asarray([index.get(labels.get(p), -1) for p in paths], np.int64)
    probs = fit_probabilities(np.asarray(features, np.float32), y, len(classes))
    return HeadMap(tuple(classes), probs.argmax(1), probs.max(1), int((y >= 0).sum()))
