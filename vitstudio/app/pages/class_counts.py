"""The Folder tab's Counts page, Qt-free: how many images each class has — predicted by the model, given by the
folders (a class folder's name), and both — so an unbalanced folder or a class the model never predicts shows at a
glance, before training or sorting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..evented import Event, EventedModel
from . import PageEntry

if TYPE_CHECKING:
    from vitstudio.core.folder.results import FolderResults


@dataclass(frozen=True)
class ClassCount:
    name: str
    predicted: int  # images the model puts in this class
    given: int  # images whose folder names this class
    agree: int  # both: given this class and predicted as it


def count_classes(results: FolderResults) -> tuple[ClassCount, ...]:
    """One row per class named by the model's predictions or by the folders, most images first."""
    given_names, given = results.given_codes  # ints per row, made in the scan job
    names = np.asarray(sorted(set(results.labels) | set(given_names.tolist()) | {""}), str)  # "": none, not listed
    index = {name: i for i, name in enumerate(names.tolist())}
    g = np.asarray([index[n] for n in given_names.tolist()], np.int64)[given]
    p = (np.asarray([index[n] for n in results.labels], np.int64)[results.predicted] if results.has_predictions
         else np.full(len(results), index[""], np.int64))
    k = len(names)
    counts = zip(np.bincount(p, minlength=k), np.bincount(g, minlength=k), np.bincount(p[p == g], minlength=k))
    rows = [ClassCount(str(name), int(a), int(b), int(c)) for name, (a, b, c) in zip(names, counts) if name and a + b]
    return tuple(sorted(rows, key=lambda r: (-max(r.predicted, r.given), r.name)))


class ClassCounts(EventedModel):
    """The page's model: its rows follow the folder's results (`changed` announces them)."""

    changed = Event("rows")

    title = "Counts"
    tooltip = "Images per class: predicted by the model, given by the folders, and both"

    def __init__(self, folder=None) -> None:
        self.rows: tuple[ClassCount, ...] = ()
        self.total = 0
        if folder is not None:  # the Folder model's results, and the same rows after a move (their folders changed)
            folder.results_changed.connect(self.show)
            folder.relocated.connect(self.show)

    def show(self, results: FolderResults | None) -> None:
        self.rows = count_classes(results) if results is not None else ()
        self.total = len(results) if results is not None else 0
        self.changed.emit(self.rows)

    def summary(self) -> str:
        """The model's classes and the folders' counted apart (they may be two vocabularies: digits predicted on
        photos of animals), of the whole folder (the table's filters do not apply here)."""
        if not self.total:
            return "Open a folder to count its images per class."
        predicted = sum(1 for r in self.rows if r.predicted)
        folders = sum(1 for r in self.rows if r.given)
        unfiled = self.total - sum(r.given for r in self.rows)
        return (f"All {self.total} images of the folder: {predicted} classes predicted, {folders} class folders" +
                (f", {unfiled} images in none" if unfiled else "") + ".")


PAGE = PageEntry("counts", "Explore", ClassCounts, rank=30)
