"""Exporting the Folder tab's selection, Qt-free: into class folders (a sort's plan: the face runs it
as an undoable sort), a labels file, a CSV of every column, the masks of the Paint page's segmentation as COCO JSON,
or the Training tab's dataset in one click.

What is exported, as FiftyOne exports the view the App shows unless samples are selected in it: the rows picked in
the table when two or more are (a deliberate multi-selection; the gallery picks one at a time), else every row the
filters leave — the predicted class, confidence, correctness, tag and saved-view filters, the map's box or lasso. One
click on a row to look at it does not shrink an export to that image. The files are written by the core
(`core/folder/selection_export.py`, `core/dense/export.py`): whole or not at all; the user's folder is written only by a
copy or a move into class folders, which the user asked for."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from vitstudio.core.files import counted

from .evented import Event, EventedModel, ViewState
from .folder_scores import score_columns
from .jobs import KeyedJobs
from .notices import describe

if TYPE_CHECKING:
    from .folder_model import FolderModel

SLOTS = {slot: ("paths",) for slot in ("labels", "table", "coco", "training")}  # besides the model
PAINT_FIRST = "Paint some masks on the Paint page first: the COCO export holds the masks segmented from them."


class ExportState(ViewState):
    """What an export's job is of: the model and the paths opened (another of either discards a pending export)."""

    CONTEXT = ("model",)
    model: int | None = None
    paths: tuple = ()


class FolderExport(EventedModel):
    said = Event('level ("info", "warning"), one line')
    busy = Event("True while an export job runs (progress shown, Cancel offered)")
    progress = Event("an export job's Progress")
    train_requested = Event("a labels file: the Training tab takes it as its dataset")

    def __init__(self, folder_model: FolderModel, tags: Callable[[], list] = list,
                 labels: Callable[[], dict] = dict) -> None:
        self.folder = folder_model
        self._tags, self._labels = tags, labels  # per row: tag names; path -> the Labels tab's label
        self.state = ExportState(model=folder_model.state.model, paths=folder_model.state.paths)
        self.jobs = KeyedJobs(self.state, SLOTS, folder_model.runner, long=tuple(SLOTS))
        folder_model.state.connect(self._follow)

    def _follow(self, name: str, value) -> None:
        if name in ("model", "paths"):
            setattr(self.state, name, value)  # a pending export of the other model or folder is discarded
            self.busy.emit(False)

    # -- what is exported --------------------------------------------------------------------------------------
    def chosen(self, picked: Sequence[int] = ()) -> np.ndarray:
        """The rows an export takes: `picked` (the table's selected rows) when two or more, else every row
        the filters leave."""
        return np.asarray(sorted(picked) if len(picked) > 1 else self.folder.rows, np.int64)

    def describe_choice(self, picked: Sequence[int] = ()) -> str:
        n = len(self.chosen(picked))
        return f"{counted(n, 'image')} {'selected in the table' if len(picked) > 1 else 'shown'}"

    def items(self, rows) -> list[tuple[str, str | None]]:
        """(path, label) of the rows: the label given on the Labels tab, else the class folder; None without."""
        return labelled_items(self.folder.results, rows, self._labels())

    def _inputs(self, rows) -> tuple:
        """What the every-column job reads, as plain values (the job builds the columns off the GUI thread)."""
        tags = self._tags()
        return (self.folder.results, np.asarray(rows, np.int64), [tags[r] if r < len(tags) else set() for r in rows],
                self._labels(), self.folder.fit, self.folder.report, score_columns(self.folder.scores))

    # -- the exports -------------------------------------------------------------------------------------------
    def class_folders(self, rows, out: str, move: bool = False):
        """The plan that copies (or moves) the rows into OUT/<label>/: the face runs it as an undoable sort."""
        from vitstudio.core.folder.selection_export import class_folder_plan
        from vitstudio.core.folder.sorting import check_out_folder

        check_out_folder([p for p in self.folder.state.paths if os.path.isdir(p)], out)
        return class_folder_plan(self.items(rows), out, move)

    def labels_csv(self, rows, file: str) -> None:
        """The rows as a labels file (path,label), which finetune, audit and the Training tab read back (in the
        background: 100k rows take half a second)."""
        self._start("labels", "Export a labels file", labels_job, self.folder.results, np.asarray(rows, np.int64),
                    self._labels(), file)

    def table_csv(self, rows, file: str) -> None:
        """Every column of the rows (the table's, the tags, the Labels tab's label, out-of-distribution, the label
        review's flags and the brain's scores where computed) to FILE, in the background."""
        self._start("table", "Export every column", table_job, *self._inputs(rows), file)

    def coco(self, rows, file: str, painted: dict[str, np.ndarray], classes: tuple[str, ...]) -> bool:
        """The rows segmented from the Paint page's masks, as COCO JSON (RLE), in the background."""
        if not painted or self.folder.app.model is None:
            self.said.emit("warning", PAINT_FIRST)
            return False
        root = self.folder.folder or os.path.commonpath([os.path.dirname(p) for p in self.folder.results.paths])
        self._start("coco", "Export masks as COCO", coco_job, self.folder.app.model,
                    [self.folder.results.paths[r] for r in rows], painted, tuple(classes), root, file)
        return True

    def to_training(self, rows) -> bool:
        """The rows as the Training tab's dataset: a labels file in the app's data folder (nothing in the user's
        folder), handed on by `train_requested` once written; False (and why) with labels of fewer than two classes."""
        results, labels = self.folder.results, self._labels()
        if len({labels.get(results.paths[r]) or results.given[r] for r in rows} - {""}) < 2:
            self.said.emit("warning", f"The {counted(len(rows), 'image')} chosen have labels of fewer than two "
                                      "classes: a classifier needs two (label them on the Labels tab).")
            return False
        named = os.path.basename(os.path.normpath(self.folder.folder)) if self.folder.folder else "dropped"
        self._start("training", "Dataset for training", training_job, results, np.asarray(rows, np.int64), labels,
                    named)
        return True

    def running(self) -> bool:
        return any(self.jobs.running(slot) for slot in SLOTS)

    def cancel(self) -> None:
        """Stop the export under way: a file is written whole when the job ends, so nothing is written."""
        for slot in SLOTS:
            self.jobs.discard(slot)
        self.busy.emit(False)
        self.said.emit("info", "Export cancelled: nothing written.")

    # -- carrying them out -------------------------------------------------------------------------------------
    def _start(self, slot: str, name: str, fn, *inputs) -> None:
        from vitstudio.core.jobs import Progress

        self.busy.emit(True)
        self.progress.emit(Progress(0, 1, name))  # what the bar says until the job's own progress comes
        done = self._on_training if slot == "training" else self._on_done
        self.jobs.start(slot, name, fn, *inputs, on_yield=self.progress.emit, on_result=done,
                        on_error=self._on_failed)

    def _on_done(self, said: str) -> None:
        self.busy.emit(False)
        self.said.emit("info", said)

    def _on_training(self, path: str) -> None:
        self.busy.emit(False)
        self.train_requested.emit(path)

    def _on_failed(self, exc: BaseException) -> None:
        self.busy.emit(False)
        self.said.emit("warning", f"Nothing written: {describe(exc)}")


def labelled_items(results, rows, labels: dict) -> list[tuple[str, str | None]]:
    return [(results.paths[r], labels.get(results.paths[r]) or results.given[r] or None) for r in rows]


def labels_job(cancel, results, rows, labels: dict, file: str) -> str:
    from vitstudio.core.folder.selection_export import write_labels_csv

    n = write_labels_csv(file, labelled_items(results, rows, labels))
    return f"Wrote {counted(n, 'row')} to {file}"


def training_job(cancel, results, rows, labels: dict, name: str) -> str:
    from vitstudio.core.folder.selection_export import selection_labels_file

    return str(selection_labels_file(labelled_items(results, rows, labels), name))


def table_job(cancel, results, rows, tags, labels: dict, fit, report, scores: dict, file: str) -> str:
    from vitstudio.core.folder.selection_export import csv_bytes, selection_columns, table_rows, write_whole
    from vitstudio.core.jobs import Cancelled

    columns = selection_columns(results, rows, tags, labels, fit, report, extra=scores)
    cells = table_rows(columns)  # 100k rows: seconds; a cancel meanwhile writes nothing
    if cancel.cancelled:
        raise Cancelled
    write_whole(file, csv_bytes(tuple(columns), cells))
    return f"Wrote {counted(len(cells), 'row')} of {len(columns)} columns to {file}"


def coco_job(cancel, loaded, files: list[str], painted: dict[str, np.ndarray], classes: tuple[str, ...], root: str,
             file: str):
    """The files segmented from the painted masks (as the Paint page segments), written as COCO JSON, file names
    relative to `root`; nothing is written when cancelled."""
    from vitstudio.core.dense.export import coco_assembled, coco_masks
    from vitstudio.core.dense.painted import PaintedMask
    from vitstudio.core.dense.segment import SegmentSettings, segment_images
    from vitstudio.core.folder.selection_export import write_whole
    from vitstudio.core.jobs import Cancelled

    masks = [PaintedMask(path, "", labels) for path, labels in painted.items()]
    done = yield from segment_images(loaded, files, masks, SegmentSettings(classes=tuple(classes)), cancel=cancel,
                                     keep=coco_masks)  # each mask's RLE as it comes: memory flat in the images
    if cancel.cancelled:
        raise Cancelled
    named = [(os.path.relpath(path, root), kept) for path, kept in done.images]
    document = coco_assembled(named, done.classes, f"segmented by retrieval from {len(masks)} painted images, "
                                                   f"block {done.layer}")
    write_whole(file, json.dumps(document).encode("utf-8"))
    skipped = f"; {counted(len(done.errors), 'image')} unreadable" if done.errors else ""
    return f"Wrote the masks of {counted(len(named), 'image')} to {file}{skipped}"
