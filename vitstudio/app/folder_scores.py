"""The brain's scores on the Folder tab, Qt-free: what each score column says where it has no value,
the scores as the selection export's extra columns, and each score's range and bins for the map's continuous colour
scale. The scores themselves are `vitstudio scores`'s (core/folder/scores.py, its result cache), computed by the
Folder model's `scores` job once the folder is embedded."""

from __future__ import annotations

import numpy as np

from vitstudio.core.folder.score_names import ABOUT, NAMES

BINS = 10  # the map's colour steps, as confidence's
SCORING = "being computed (after the map)"
NO_CLASSES = "this model has no classes: no prediction to be hard or mistaken"
NO_FOLDERS = ("no image is in a class folder: mistakenness compares the prediction with the folder an image is in "
              "(open a folder of class folders)")
LOOSE = "images outside a class folder have none"


def missing(scores, name: str) -> str:
    """Why the column `name` is empty for some rows or all ('' when every row has its score)."""
    if scores is None:
        return SCORING
    values = getattr(scores, name)
    if not np.isnan(values).any():
        return ""
    if not any(scores.predicted):
        return NO_CLASSES
    if name == "mistakenness" and scores.mistakenness_note:
        return scores.mistakenness_note  # folders named for classes the model does not know
    return NO_FOLDERS if np.isnan(values).all() else LOOSE


def about(scores, name: str) -> str:
    """A score column's tooltip: what it measures, then why it is empty where it is."""
    why = missing(scores, name)
    return f"{name}: {ABOUT[name]}." + (f"\nEmpty: {why}." if why else "")


def score_columns(scores) -> dict[str, np.ndarray]:
    """The four scores, one value per results row (NaN: none), for the export of every column; {} until computed."""
    return {} if scores is None else {name: getattr(scores, name) for name in NAMES}


def score_range(name: str, classes: int) -> tuple[float, float]:
    """The colour scale's ends: [0, 1] for the normalised scores; for hardness, 0 to ln(C), the entropy of a uniform
    prediction over the model's C classes (its largest possible value)."""
    return (0.0, float(np.log(classes))) if name == "hardness" and classes > 1 else (0.0, 1.0)


def score_bins(values: np.ndarray, low: float, high: float) -> list[tuple[int, np.ndarray]]:
    """(bin, rows) for each of BINS equal steps of [low, high] holding rows (NaN rows: none), vectorised."""
    finite = np.isfinite(values)
    step = (np.nan_to_num(values, nan=low) - low) / max(high - low, 1e-12) * BINS
    index = np.clip(step.astype(np.int64), 0, BINS - 1)
    index[~finite] = -1
    order = np.argsort(index, kind="stable")
    counts = np.bincount(index[finite], minlength=BINS)
    starts = np.searchsorted(index[order], np.arange(BINS))
    return [(b, order[starts[b]:starts[b] + counts[b]]) for b in range(BINS) if counts[b]]
