"""The Folder tab's Paint page, Qt-free: paint a few masks on images of the folder, segment the whole folder
from them by retrieval from the model's patch tokens, correct any image by painting on it, export the masks.

The current image is the Folder model's selected row. A drag of the pointer paints as it moves and is one undo step
(`press`, `drag`, `release`, in the image's own pixels); when it ends, the image on screen is segmented again from
every painted image (latest request wins: a stroke made meanwhile discards the pending one), and a folder already
segmented is segmented again in the background. Everything computed is of (model, folder): another model drops the
segmentations and keeps the paint (it is the person's, not the model's).

The paint is work, kept per folder: each stroke's end (and each undo, redo, rename of the classes) writes the images
it changed into the app's records of the folder (`files.dataset_dir`: under the data folder, never in the dataset;
the PNGs `vitstudio segment --masks` reads), so another folder opened and this one opened again, or the app started
again, finds the same masks; within a session the undo history comes back with them. A mask whose image is gone or
was changed stays in the records, unread, and the page says so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..evented import Event, EventedModel, ViewState
from ..jobs import KeyedJobs
from ..notices import describe
from ..paint_jobs import FOLDER_SLOTS, SLOTS, Segmented, current_job, export_job, folder_job, picture_job
from ..paint_masks import RECORDS_INDEX, UNPAINTED, PaintMasks
from ..undo import UndoRefused
from . import PageEntry

if TYPE_CHECKING:
    from vitstudio.core.dense.segment import SegmentResult
    from vitstudio.core.folder.results import FolderResults

SELECT_FIRST = "Select an image in the table or the gallery to paint on it."
KEPT_FOLDERS = 4  # folders whose undo history a session keeps (their masks are on disk whatever the number)


class PaintPageState(ViewState):
    """What the page's results are of: the model and the image shown (the context), the folder's paths and the
    paint's revision (every stroke, undo, redo or class rename makes a new one)."""

    model: int | None = None
    image: str | None = None
    paths: tuple = ()
    revision: int = 0


class PaintStroke:
    """One stroke (a drag of the pointer) as a step of the app's undo stack: the page's own undo of its paint, taken
    back only while the page shows the folder it was painted on."""

    def __init__(self, page: PaintPageModel) -> None:
        self.page, self.paths = page, page.state.paths
        self.text = f"Paint stroke on {Path(page.image).name}" if page.image else "Paint stroke"

    def _check(self, verb: str) -> None:
        if self.page.state.paths != self.paths:
            raise UndoRefused(f"The stroke to {verb} was painted on another folder: open it again to {verb} it.")

    def undo(self) -> None:
        self._check("undo")
        self.page.undo()

    def redo(self) -> None:
        self._check("redo")
        self.page.redo()


class PaintPageModel(EventedModel):
    changed = Event('what to draw again: "picture", "paint", "segmentation", "folder"')
    said = Event("the page's line")
    busy = Event("True while the folder is segmented or exported")
    progress = Event("the folder job's Progress")
    exported = Event("(SegmentResult, [files written])")

    title = "Paint"
    tooltip = ("Paint a few masks (brush, eraser, classes), segment every image of the folder from them by the "
               "model's patch tokens, correct any image, export the masks (PNG, COCO, areas CSV)")

    def __init__(self, folder) -> None:
        self.folder = folder
        self.state = PaintPageState(model=folder.state.model, paths=folder.state.paths)
        self.paint = PaintMasks()
        self._declare_classes(tuple(self.paint.state.classes))
        self._dirty: set[str] = set()  # images whose paint changed since it was last written to the records
        self._sessions: dict[tuple, tuple] = {}  # paths -> (masks, undo, redo, classes) of folders left this session
        self.jobs = KeyedJobs(self.state, SLOTS, folder.runner, long=FOLDER_SLOTS, without_context=FOLDER_SLOTS)
        self.files: tuple[str, ...] = tuple(folder.results.paths) if folder.results is not None else ()
        self.picture: np.ndarray | None = None  # (H, W, 3) uint8, the current image
        self.shown: Segmented | None = None  # the current image's latest segmentation
        self.segmented: SegmentResult | None = None  # the whole folder's, of `segmented_revision`
        self.segmented_revision = -1
        self.line = "Open a folder, then select an image to paint on it."
        self._moves = 0  # paint steps of the drag under way
        self._last: tuple[float, float] | None = None
        self.paint.changed.connect(self._on_painted)
        folder.results_changed.connect(self.show)
        folder.relocated.connect(self._on_relocated)
        folder.row_selected.connect(self._on_row)
        folder.state.connect(self._on_folder_state)
        self.state.events.image.connect(self._on_image)
        self._take_up(folder.state.paths)  # a page built on a folder (the app started again) finds its paint

    @property
    def image(self) -> str | None:
        return self.state.image

    # -- following the folder ----------------------------------------------------------------------------------
    def show(self, results: FolderResults | None) -> None:
        self.files = tuple(results.paths) if results is not None else ()
        if results is None:
            self.state.image = None
            self._drop_segmentations()
            self._say("Open a folder, then select an image to paint on it.")
        else:
            self._say(SELECT_FIRST if self.image is None else self._summary())

    def _on_folder_state(self, name: str, value) -> None:
        if name == "model":
            self.state.model = value  # the jobs' context: every pending request of the old model is discarded
            self._drop_segmentations()
        elif name == "paths":
            self._keep()
            left = self.state.paths
            if left and (self.paint.masks or self.paint.undo_steps or self.paint.redo_steps):
                self._sessions.pop(left, None)
                self._sessions[left] = (self.paint.masks, self.paint.undo_steps, self.paint.redo_steps,
                                        tuple(self.paint.state.classes))
                while len(self._sessions) > KEPT_FOLDERS:
                    self._sessions.pop(next(iter(self._sessions)))
            self.state.update(paths=value, image=None)
            self._take_up(value)
            self._drop_segmentations()

    def _records(self) -> Path | None:
        """Where the opened folder's paint is kept (None for a drop of files: its paint lives for the session)."""
        from vitstudio.core.files import dataset_dir

        return dataset_dir(self.folder.folder) / "painted" if self.folder.folder else None

    def _take_up(self, paths: tuple) -> None:
        """The paint of `paths`: this session's (with its undo history) or, once the app started again, the
        records'; none for a folder never painted."""
        self._dirty.clear()
        self._kept_in = (self._records(), self.folder.folder)  # where this paint is written from now on
        if paths in self._sessions:
            masks, undo, redo, classes = self._sessions.pop(paths)
            self.paint.masks, self.paint.undo_steps, self.paint.redo_steps = masks, undo, redo
            self._declare_classes(classes)
            for path in masks:
                self.paint.changed.emit(path)
        elif self._records() is not None and (self._records() / RECORDS_INDEX).is_file():
            classes, aside = self.paint.restore(self._records(), self.folder.folder)
            if classes is not None:
                self._declare_classes(classes)
            if aside:
                self.folder.app.message.emit("warning", (
                    f"{len(aside)} painted mask{'s' * (len(aside) != 1)} of {self.folder.folder} kept in "
                    f"{self._records()} but not shown: {'their images are' if aside[1:] else 'its image is'} gone "
                    f"or changed size since painted ({', '.join(aside[:3])}{', …' * (len(aside) > 3)})."))
        else:
            self.paint.masks, self.paint.undo_steps, self.paint.redo_steps = {}, [], []
        self._dirty.clear()
        self._kept_classes = tuple(self.paint.state.classes)
        self.state.revision += 1

    def _on_painted(self, path: str) -> None:
        self._dirty.add(path)
        self.changed.emit("paint")

    def _keep(self) -> None:
        """The images painted since the last write (and the classes, when renamed), written to the records of the
        folder this paint is of (atomic; one PNG per image)."""
        (records, folder), dirty = self._kept_in, self._dirty
        classes = tuple(self.paint.state.classes)
        if records is None or not dirty and classes == self._kept_classes:
            return
        self._dirty, self._kept_classes = set(), classes
        try:
            self.paint.keep(records, folder, sorted(dirty))
        except OSError as exc:  # the disk full or read-only: said, and tried again at the next change
            self._dirty |= dirty
            self._kept_classes = ()
            self.folder.app.message.emit("warning", f"The paint could not be kept in {records}: {exc}")

    def _drop_segmentations(self) -> None:
        self.jobs.clear()
        self.shown, self.segmented, self.segmented_revision = None, None, -1
        self.busy.emit(False)
        self.changed.emit("segmentation")
        self.changed.emit("folder")

    def _on_relocated(self, results: FolderResults) -> None:
        """Files moved (a sort, its undo): the same rows under new paths; the paint follows its images."""
        moves = {old: new for old, new in zip(self.files, results.paths) if old != new}
        self.files = tuple(results.paths)
        moved = [p for p in self.paint.masks if p in moves]
        self.paint.masks = {moves.get(p, p): m for p, m in self.paint.masks.items()}
        for steps in (self.paint.undo_steps, self.paint.redo_steps):  # an undo after the move finds its image
            steps[:] = [replace(step, path=moves.get(step.path, step.path)) for step in steps]
        self._dirty |= {*moved, *(moves[p] for p in moved)}  # the records follow: old names go, new ones come
        self._keep()
        if self.image in moves:
            self.state.image = moves[self.image]

    def _on_row(self, row: int | None) -> None:
        results = self.folder.results
        self.state.image = results.paths[row] if row is not None and results is not None else None

    def _on_image(self, path: str | None) -> None:
        self.picture, self.shown, self._moves = None, None, 0
        self.changed.emit("picture")
        if path is None:
            self._say(SELECT_FIRST if self.files else "Open a folder, then select an image to paint on it.")
            return
        self.jobs.start("picture", "Picture to paint", picture_job, path, on_result=self._on_picture,
                        on_error=self._on_failed)

    def _on_picture(self, picture: np.ndarray) -> None:
        self.picture = picture
        self.changed.emit("picture")
        self.resegment()

    # -- painting --------------------------------------------------------------------------------------------
    def press(self, x: float, y: float) -> None:
        """The pointer went down at (x, y) of the image's pixels: a stroke starts (one undo step, however long)."""
        self._moves, self._last = 0, (x, y)
        self._paint([(x, y)])

    def drag(self, x: float, y: float) -> None:
        if self._last is not None:
            self._paint([self._last, (x, y)])
            self._last = (x, y)

    def release(self) -> None:
        """The stroke ended: it becomes one undo step, and the image (and a segmented folder) is segmented again."""
        if self._last is None:
            return
        self._last = None
        self.paint.join_last(self._moves)
        if self._moves:
            self.folder.undo.push(PaintStroke(self), done=True)  # one undo step of the app's, among its others
            self._revised()

    def _paint(self, points: list[tuple[float, float]]) -> None:
        if self.picture is None or self.image is None:
            return
        try:
            self._moves += self.paint.stroke(self.image, self.picture.shape[:2], points)
        except ValueError as exc:  # painted at another size: the file changed since
            self._last = None
            self._say(str(exc))

    def undo(self) -> None:
        if self.paint.undo() is not None:
            self._revised()

    def redo(self) -> None:
        if self.paint.redo() is not None:
            self._revised()

    def set_classes(self, names: tuple[str, ...]) -> None:
        """Rename or add classes (index order); a class painted somewhere cannot go."""
        names = tuple(n.strip() for n in names)
        if len(names) < 2 or not all(names) or len(set(names)) != len(names):
            raise ValueError("the classes are two or more different names")
        used = max((int(m[m != UNPAINTED].max()) for m in self.paint.masks.values() if (m != UNPAINTED).any()),
                   default=-1)
        if used >= len(names):
            raise ValueError(f"class '{self.paint.state.classes[used]}' is painted: erase it before removing it")
        self._declare_classes(names)
        self._revised()

    def rename_classes(self, text: str) -> bool:
        """The classes as typed ("background, object, sky"); False (and why, on the line) when refused."""
        try:
            self.set_classes(tuple(text.split(",")))
        except ValueError as exc:
            self._say(f"{str(exc)[0].upper()}{str(exc)[1:]}.")
            return False
        return True

    def _declare_classes(self, names: tuple[str, ...]) -> None:
        """The brush paints one of the classes: its field offers their indices, shown by name (a class picker
        follows by itself); a brush on a class that went takes the object class back."""
        with self.paint.state.batch():
            self.paint.state.classes = names
            self.paint.state.redeclare("brush_class", choices=tuple(range(len(names))), labels=names)

    def open_painted(self, folder: str) -> bool:
        """The masks painted earlier into `folder` (an export's painted/, or any masks in `vitstudio segment`'s
        format) replace the paint, undo starting afresh; False (and why, on the line) when refused."""
        before = set(self.paint.masks)
        try:
            self.paint.load(folder, list(self.files))
            self._dirty |= before  # replaced: the records lose what the masks opened do not hold
        except ValueError as exc:
            self._say(f"Not opened: {exc}.")
            return False
        used = max((int(m[m != UNPAINTED].max()) for m in self.paint.masks.values() if (m != UNPAINTED).any()),
                   default=-1)
        names = tuple(self.paint.state.classes)
        self._declare_classes(names + tuple(f"class-{i}" for i in range(len(names), used + 1)))
        self._revised()
        return True

    def unpainted_classes(self) -> list[str]:
        """The classes no image paints yet: the bank could never vote for them."""
        counts = np.zeros(256, np.int64)
        for labels in self.paint.masks.values():
            counts += np.bincount(labels.ravel(), minlength=256)
        return [name for i, name in enumerate(self.paint.state.classes) if not counts[i]]

    def _revised(self) -> None:
        self.state.revision += 1  # a pending segmentation of the older paint is discarded
        self._keep()
        self.resegment()
        if self.segmented is not None or self.jobs.running("folder"):
            self.segment_folder()  # the correction joins the bank: the folder follows in the background

    # -- segmenting ------------------------------------------------------------------------------------------
    def painted(self) -> dict[str, np.ndarray]:
        """Copies of the painted masks: a job reads them while the page goes on painting."""
        return {p: m.copy() for p, m in self.paint.masks.items() if (m != UNPAINTED).any()}

    def ready(self) -> str:
        """'' when the folder can be segmented; else what is missing, in one line."""
        if self.folder.app.model is None or not self.files:
            return "Open a folder first."
        missing = self.unpainted_classes()
        if missing:
            return f"Paint some {' and some '.join(missing)} (on one image or several) to segment the others."
        return ""

    def resegment(self) -> None:
        """The image on screen segmented again from the paint as it is now (latest request wins)."""
        if self.image is None or self.picture is None or self.ready():
            self.jobs.discard("current")
            if self.shown is not None:  # of paint that no longer holds every class: nothing would vote like it
                self.shown = None
                self.changed.emit("segmentation")
            self._say(self.ready() if self.image is not None else SELECT_FIRST)
            return
        self.jobs.start("current", "Segment the image", current_job, self.folder.app.model, self.image,
                        self.painted(), tuple(self.paint.state.classes), on_result=self._on_current,
                        on_error=self._on_failed)

    def _on_current(self, segmented: Segmented) -> None:
        self.shown = segmented
        self.changed.emit("segmentation")
        self._say(self._summary())

    def segment_folder(self) -> bool:
        """Every image of the opened folder segmented in the background; False (and why, on the line) if not now."""
        why = self.ready() or ("" if self.folder.folder else "Segmenting needs a folder opened (File → Open "
                                                              "folder), not dropped files.")
        if why:
            self._say(why)
            return False
        self.busy.emit(True)
        revision = self.state.revision
        self.jobs.start("folder", "Segment the folder", folder_job, self.folder.app.model, self.folder.folder,
                        self.painted(), tuple(self.paint.state.classes), on_yield=self.progress.emit,
                        on_result=lambda result: self._on_folder(result, revision), on_error=self._on_failed)
        return True

    def cancel(self) -> None:
        """Stop segmenting (or exporting) the folder; what it read is cached and not read again."""
        self.jobs.discard("folder")
        self.jobs.discard("export")
        self.busy.emit(False)
        self._say("Cancelled; the tokens read so far are cached and will not be read again.")

    def _on_folder(self, result: SegmentResult, revision: int) -> None:
        self.segmented, self.segmented_revision = result, revision
        self.busy.emit(False)
        self.changed.emit("folder")
        self._say(self._summary())

    def export(self, out: str, inside: bool = False) -> bool:
        """OUT/<stem>.png per image, OUT/masks.coco.json, OUT/areas.csv and OUT/painted/ (the painted masks, which
        `vitstudio segment FOLDER --masks OUT/painted` reads); never inside the dataset folder unless `inside`."""
        why = self.ready() or ("" if self.folder.folder else "Exporting needs a folder opened, not dropped files.")
        if not why and not inside and _within(out, self.folder.folder):  # the core refuses it too, in CLI words
            why = (f"{out} is inside the folder being segmented: its masks would join the folder's images. Choose "
                   f"a folder outside it.")
        if why:
            self._say(why)
            return False
        self.busy.emit(True)
        self._say(f"Exporting the masks to {out}…")
        self.jobs.start("export", "Export masks", export_job, self.folder.app.model, self.folder.folder,
                        self.painted(), tuple(self.paint.state.classes), str(out), inside,
                        on_yield=self.progress.emit, on_result=self._on_exported, on_error=self._on_failed)
        return True

    def _on_exported(self, done: tuple) -> None:
        result, written = done
        self.busy.emit(False)
        self._say(f"Exported {len(result.images)} masks, {', '.join(w.rsplit('/', 1)[-1] for w in written)} and "
                  f"the painted masks (painted/).")
        self.exported.emit(result, written)

    def _on_failed(self, exc: BaseException) -> None:
        self.busy.emit(False)
        self._say(f"Failed: {describe(exc)}")

    # -- what the page says ------------------------------------------------------------------------------------
    def areas(self) -> dict[str, float]:
        """Each class's share of the current image's pixels (its latest segmentation), else {}."""
        return dict(self.shown.shares) if self.shown is not None and self.shown.image == self.image else {}

    def _summary(self) -> str:
        painted = len(self.painted())
        line = self.ready() or (f"Segmented from {painted} painted image{'s' * (painted != 1)}"
                                + (f" ({self.shown.bank:,} patches of block {self.shown.layer})" if self.shown else "")
                                + ".")
        if self.segmented is not None:
            stale = " (before the last strokes: segmenting again…)" * (self.segmented_revision != self.state.revision)
            images = self.segmented.images
            mean = {c: np.mean([i.shares[c] for i in images]) for c in self.segmented.classes} if images else {}
            line += (f" The folder: {len(images)} images segmented{stale}"
                     + "".join(f", {c} {share:.0%}" for c, share in mean.items()) + " of the pixels on average.")
        return line

    def _say(self, line: str) -> None:
        self.line = line
        self.said.emit(line)


def _within(path: str, folder: str) -> bool:
    inner, outer = Path(path).resolve(), Path(folder).resolve()
    return inner == outer or outer in inner.parents


PAGE = PageEntry("paint", "Label", PaintPageModel, rank=20)
