"""Linear probes per layer over a labelled folder (Alain & Bengio 2016): at which depth does the class become
readable? One pass over the folder caches every block's feature (`folder/layer_cache.py`); a k-fold linear probe
per block is then fitted with the quick preset's objective, every block and fold as one problem
(`stacked_probes.fold_accuracies`), and the logit lens's
accuracy at each depth is read from the same cache where the model's classes are the folder's.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vitstudio.core.data.datasets import scan_dataset
from vitstudio.core.folder.embedcache import model_fingerprint
from vitstudio.core.folder.layer_cache import FEATURE_NOTE, FolderLayers, embed_layers
from vitstudio.core.folder.resultcache import load_result, result_key, save_result
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.train.stacked_probes import fold_accuracies

FOLDS = 5


@dataclass(frozen=True)
class LayerProbes:
    accuracy: np.ndarray  # (blocks,) mean held-out accuracy of the folds
    spread: np.ndarray  # (blocks,) standard deviation over the folds
    lens_accuracy: np.ndarray | None  # (blocks,) the logit lens's accuracy, None when it cannot be scored
    lens_note: str  # why there is no lens accuracy, or on which images it was scored
    folds: int
    images: int
    classes: tuple[str, ...]
    errors: tuple[tuple[str, str], ...]

    def to_json(self) -> dict:
        lens = self.lens_accuracy
        return {"images": self.images, "classes": list(self.classes), "folds": self.folds, "features": FEATURE_NOTE,
                "lens_note": self.lens_note,
                "blocks": [{"block": i, "probe_accuracy": round(float(a), 6), "probe_spread": round(float(s), 6),
                            "lens_accuracy": None if lens is None else round(float(lens[i]), 6)}
                           for i, (a, s) in enumerate(zip(self.accuracy, self.spread))]}


def labelled_files(source: str | Path) -> tuple[list[tuple[Path, int]], tuple[str, ...]]:
    """(path, class index) of every image of a folder of class folders (train/ and val/ alike) or a labels CSV."""
    scan = scan_dataset(source)
    return _labelled(scan), scan.classes


def _labelled(scan) -> list[tuple[Path, int]]:
    return [(p, i) for i, c in enumerate(scan.classes) for split in (scan.train, scan.val or {})
            for p in split.get(c, ())]


def fold_ids(labels: np.ndarray, folds: int, seed: int = 0) -> np.ndarray:
    """(N,) fold of each image, stratified: each class dealt round-robin over the folds in a seeded order."""
    rng = np.random.default_rng(seed)
    out = np.empty(len(labels), np.int64)
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        out[rng.permutation(members)] = np.arange(len(members)) % folds
    return out


def probe_accuracy(features: np.ndarray, labels: np.ndarray, folds: np.ndarray, classes: int,
                   cancel: CancelToken | None = None) -> np.ndarray:
    """(folds,) held-out accuracy of a linear probe fitted on the other folds (the quick preset's objective)."""
    fit = fold_accuracies([features], labels, folds, classes, cancel)
    try:
        while True:
            next(fit)
    except StopIteration as stop:
        return stop.value[0]


class _Blocks:
    """The blocks' features as a sequence read one block at a time (a big model's blocks need not be held at once)."""

    def __init__(self, layers: FolderLayers) -> None:
        self.layers = layers

    def __len__(self) -> int:
        return self.layers.blocks

    def __getitem__(self, block: int) -> np.ndarray:
        return self.layers.block(block)


def lens_scores(layers: FolderLayers, labels: np.ndarray, classes: tuple[str, ...]) -> tuple[np.ndarray | None, str]:
    """The lens's accuracy after every block, on the images whose class the model knows by name."""
    top1 = layers.lens_top1()
    if top1 is None:
        return None, "the logit lens does not read this model (see `explain --method logit-lens`)"
    index = {name: i for i, name in enumerate(layers.labels)}
    known = np.asarray([classes[c] in index for c in labels])
    if not known.any():
        return None, "none of the folder's classes is one of the model's, so the lens's classes cannot be scored"
    truth = np.asarray([index.get(classes[c], -1) for c in labels])
    accuracy = (top1[known] == truth[known, None]).mean(0)
    return accuracy, f"the lens scored on {int(known.sum())} of {len(labels)} images (classes the model knows)"


def probe_layers(loaded: LoadedModel, source: str | Path, folds: int = FOLDS, batch_size: int | None = 32,
                 cancel: CancelToken | None = None, seed: int = 0) -> Generator[Progress, None, LayerProbes]:
    """Generator: the folder's layers read once (cached), then a k-fold probe per block. Returns LayerProbes, kept
    (`folder/resultcache.py`) under the files' contents, the model, the labels and the folds: probing an unchanged
    folder again reads it back instead of refitting."""
    scan = scan_dataset(source)
    files, classes = _labelled(scan), scan.classes
    layers = yield from embed_layers(loaded, [str(p) for p, _ in files], batch_size, cancel)
    label_of = {str(p): c for p, c in files}
    labels = np.asarray([label_of[p] for p in layers.paths], np.int64)
    key = result_key("layers", model_fingerprint(loaded, whole=True), layers.content, labels.tolist(), classes,
                     sorted(layers.errors), sorted(scan.failed), folds, seed)
    probes = load_result("layers", key)
    if not isinstance(probes, LayerProbes):
        probes = yield from _probed(layers, labels, classes, folds, seed, cancel, scan.failed)
        save_result("layers", key, probes)
    return probes


def _probed(layers: FolderLayers, labels: np.ndarray, classes: tuple[str, ...], folds: int, seed: int,
            cancel: CancelToken | None, failed) -> Generator[Progress, None, LayerProbes]:
    counts = np.bincount(labels, minlength=len(classes))
    if (counts > 0).sum() < 2:
        raise ValueError("Probes need at least two classes with readable images.")
    small = [classes[c] for c in np.flatnonzero((counts > 0) & (counts < 2))]
    if small:
        raise ValueError(f"Every class needs at least two readable images for the probes' folds; "
                         f"{', '.join(small)} {'has' if len(small) == 1 else 'have'} one.")
    folds = int(min(folds, counts[counts > 0].min()))  # a fold holds at least one image of every class
    ids = fold_ids(labels, folds, seed)
    scores = yield from fold_accuracies(_Blocks(layers), labels, ids, len(classes), cancel)  # (blocks, folds)
    lens, note = lens_scores(layers, labels, classes)
    return LayerProbes(scores.mean(1), scores.std(1), lens, note, folds, len(labels), classes,
                       (*failed, *layers.errors))  # a labels file's rows left out are named too
