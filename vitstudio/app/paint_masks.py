"""Paint to segment, Qt-free: the brush, the eraser and their undo, over each painted image at its own
resolution, kept in the painted masks' format (`core/dense/painted.py`: a class index per pixel, 255 = not painted)
and saved as one PNG per image named by its stem — the files `vitstudio segment --masks DIR` reads, so the app and the
command line segment a folder from the same painting.

A view draws `PaintMasks`: it forwards a stroke (the points the pointer went through, in the image's pixels) and
draws `mask(path)` over the image; `changed` says which image changed, so a view re-segments only what it shows.
Painting an image again replaces what was there under the brush (latest wins); the eraser un-paints. Each stroke is
one undo step, holding only the pixels it changed (the box around the stroke).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vitstudio.core.fields import FieldSpec, Range

from .evented import Event, EventedModel, ViewState

UNPAINTED = 255  # as core/dense/painted.py (not imported here: the app's model loads no image code at import)
UNDO_DEPTH = 100
RECORDS_INDEX = "painted.json"  # beside the kept PNGs: the classes and the image each PNG is of


class PaintState(ViewState):
    """The brush: which class it paints (its index in `classes`), how wide, and whether it erases."""

    CONTEXT = ()
    classes: tuple = ("background", "object")
    brush_class: int = FieldSpec(1, int, range=Range(0, 254), help="the class the brush paints (index in the classes)")
    radius: int = FieldSpec(8, int, range=Range(1, 512), help="the brush's radius in the image's pixels")
    erase: bool = False


@dataclass(frozen=True)
class Stroke:
    """One undo step: the box it changed in one image and the pixels there before it."""

    path: str
    box: tuple[int, int, int, int]  # (top, left, bottom, right), bottom and right excluded
    before: np.ndarray


def disc_line(shape: tuple[int, int], points: list[tuple[float, float]], radius: float
              ) -> tuple[np.ndarray, tuple[int, int, int, int]] | None:
    """(bool mask of the box, box) of every pixel within `radius` of the polyline through `points` (x, y), or None
    when the stroke misses the image."""
    pts = np.asarray(points, np.float64).reshape(-1, 2)
    h, w = shape
    top, left = max(0, int(np.floor(pts[:, 1].min() - radius))), max(0, int(np.floor(pts[:, 0].min() - radius)))
    bottom = min(h, int(np.ceil(pts[:, 1].max() + radius)) + 1)
    right = min(w, int(np.ceil(pts[:, 0].max() + radius)) + 1)
    if top >= bottom or left >= right:
        return None
    yy, xx = np.mgrid[top:bottom, left:right]
    hit = np.zeros(yy.shape, bool)
    starts, ends = pts[:-1] if len(pts) > 1 else pts, pts[1:] if len(pts) > 1 else pts
    for (x0, y0), (x1, y1) in zip(starts, ends):  # distance from each pixel to the segment
        dx, dy = x1 - x0, y1 - y0
        t = np.clip(((xx - x0) * dx + (yy - y0) * dy) / max(dx * dx + dy * dy, 1e-12), 0, 1)
        hit |= (xx - x0 - t * dx) ** 2 + (yy - y0 - t * dy) ** 2 <= radius * radius
    return hit, (top, left, bottom, right)


class PaintMasks(EventedModel):
    """The painted masks of a folder's images, their undo and redo, saved to and read from a masks folder."""

    changed = Event("the image path whose mask changed")

    def __init__(self, state: PaintState | None = None) -> None:
        self.state = state or PaintState()
        self.masks: dict[str, np.ndarray] = {}  # image path -> (H, W) uint8 class indices
        self.undo_steps: list[Stroke] = []
        self.redo_steps: list[Stroke] = []

    def mask(self, path: str) -> np.ndarray | None:
        return self.masks.get(path)

    def stroke(self, path: str, shape: tuple[int, int], points: list[tuple[float, float]]) -> bool:
        """Paint (or erase) along `points` on the image `path` of `shape` (H, W); False when it touched nothing."""
        labels = self.masks.get(path)
        if labels is None:
            labels = np.full(shape, UNPAINTED, np.uint8)
        elif labels.shape != tuple(shape):
            raise ValueError(f"{Path(path).name} is now {shape[1]}×{shape[0]}, painted at {labels.shape[1]}×"
                             f"{labels.shape[0]}: clear its mask to paint it again")
        hit = disc_line(labels.shape, points, self.state.radius)
        if hit is None:
            return False
        area, (top, left, bottom, right) = hit
        if not self.state.erase and self.state.brush_class >= len(self.state.classes):
            raise ValueError(f"class {self.state.brush_class} is not one of the {len(self.state.classes)} classes")
        value = UNPAINTED if self.state.erase else self.state.brush_class
        self.undo_steps = [*self.undo_steps, Stroke(path, (top, left, bottom, right),
                                                    labels[top:bottom, left:right].copy())][-UNDO_DEPTH:]
        self.redo_steps = []
        labels[top:bottom, left:right][area] = value
        self.masks[path] = labels
        self.changed.emit(path)
        return True

    def join_last(self, count: int) -> None:
        """The last `count` undo steps (one drag of the pointer, painted as it moved) become one step: the box
        around them all holding the pixels from before the first."""
        steps = self.undo_steps[len(self.undo_steps) - min(count, len(self.undo_steps)):]
        if len(steps) < 2 or len({s.path for s in steps}) != 1:
            return
        top, left = min(s.box[0] for s in steps), min(s.box[1] for s in steps)
        bottom, right = max(s.box[2] for s in steps), max(s.box[3] for s in steps)
        before = self.masks[steps[0].path][top:bottom, left:right].copy()
        for step in reversed(steps):  # unwound from the last: what each step found is what the one before left
            t, lt, b, r = step.box
            before[t - top:b - top, lt - left:r - left] = step.before
        self.undo_steps[-len(steps):] = [Stroke(steps[0].path, (top, left, bottom, right), before)]

    def undo(self) -> str | None:
        return self._swap(self.undo_steps, self.redo_steps)

    def redo(self) -> str | None:
        return self._swap(self.redo_steps, self.undo_steps)

    def _swap(self, source: list[Stroke], target: list[Stroke]) -> str | None:
        """Put back the pixels of the last step of `source`, keeping what they were as a step of `target`."""
        if not source:
            return None
        step = source.pop()
        top, left, bottom, right = step.box
        labels = self.masks[step.path]
        target.append(Stroke(step.path, step.box, labels[top:bottom, left:right].copy()))
        labels[top:bottom, left:right] = step.before
        self.changed.emit(step.path)
        return step.path

    def painted(self) -> list[str]:
        """The images with at least one painted pixel."""
        return [p for p, m in self.masks.items() if (m != UNPAINTED).any()]

    def save(self, folder: str | os.PathLike) -> list[Path]:
        """One PNG per painted image into `folder` (named by the image's stem, written atomically); an image whose
        paint was all erased loses its file."""
        from vitstudio.core.dense.painted import labels_png
        from vitstudio.core.files import atomic_write_bytes

        folder, written = Path(folder), []
        for path, labels in self.masks.items():
            target = folder / f"{Path(path).stem}.png"
            if (labels != UNPAINTED).any():
                atomic_write_bytes(target, labels_png(labels))
                written.append(target)
            else:
                target.unlink(missing_ok=True)
        return written

    def keep(self, records: Path, folder: str, paths) -> None:
        """The masks of `paths` (images of `folder`) written into the app's records of the folder (`records`: one
        PNG per painted image, as `save` writes them, and `painted.json`: the classes and which image each PNG is
        of, by its path in the folder); an image whose paint was all erased loses its PNG. Atomic writes."""
        from vitstudio.core.dense.painted import labels_png
        from vitstudio.core.files import atomic_write_bytes
        from vitstudio.core.records import read_json_file, write_json_file

        index = read_json_file(records / RECORDS_INDEX)
        named = {k: v for k, v in index.get("masks", {}).items() if isinstance(v, str)}  # PNG name -> image
        by_image = {v: k for k, v in named.items()}
        for path in paths:
            rel = Path(os.path.relpath(path, folder)).as_posix()
            labels = self.masks.get(path)
            name = by_image.get(rel) or _free_name(Path(path).stem, rel, named)
            if labels is not None and (labels != UNPAINTED).any():
                atomic_write_bytes(records / name, labels_png(labels))
                named[name], by_image[rel] = rel, name
            else:
                (records / name).unlink(missing_ok=True)
                named.pop(name, None)
                by_image.pop(rel, None)
        write_json_file(records / RECORDS_INDEX, {"classes": list(self.state.classes), "masks": named})

    def restore(self, records: Path, folder: str) -> tuple[tuple[str, ...] | None, list[str]]:
        """The masks kept in the app's records of `folder` (`keep`), undo starting afresh; returns (the classes
        they were painted with, or None; the PNGs left on disk unread: their image is gone or no longer has its
        size). Nothing in the records is removed here."""
        from vitstudio.core.data.images import ImageReadError
        from vitstudio.core.dense.painted import read_painted, upright_size
        from vitstudio.core.records import read_json_file

        index = read_json_file(records / RECORDS_INDEX)
        masks, aside = {}, []
        for name, rel in sorted(index.get("masks", {}).items()):
            image = os.path.join(str(Path(folder)), *str(rel).split("/"))  # as the folder's walk names it
            try:
                labels = np.array(read_painted(records / name), np.uint8)
                fits = labels.shape == upright_size(image)
            except (OSError, ValueError, ImageReadError):
                fits = False
            if fits:
                masks[image] = labels
            else:
                aside.append(name)
        self.masks, self.undo_steps, self.redo_steps = masks, [], []
        for path in masks:
            self.changed.emit(path)
        classes = index.get("classes")
        named = isinstance(classes, list) and len(classes) >= 2 and all(isinstance(c, str) and c for c in classes)
        return (tuple(classes) if named else None), aside

    def load(self, folder: str | os.PathLike, images: list[str]) -> None:
        """The masks painted earlier into `folder` for these images (checked as `vitstudio segment` checks them);
        the undo history starts afresh."""
        from vitstudio.core.dense.painted import match_painted

        self.masks = {m.image: m.labels.copy() for m in match_painted(folder, images)}
        self.undo_steps, self.redo_steps = [], []
        for path in self.masks:
            self.changed.emit(path)


def _free_name(stem: str, rel: str, named: dict[str, str]) -> str:
    """`stem`.png, as `vitstudio segment --masks` names a mask; another image of the same stem gets its path's hash
    beside the stem (two images called 001.png in two class folders keep their own paint)."""
    import hashlib

    name = f"{stem}.png"
    if named.get(name, rel) == rel:
        return name
    return f"{stem}.{hashlib.blake2b(rel.encode('utf-8', 'surrogateescape'), digest_size=4).hexdigest()}.png"
