"""Thumbnails of a folder's images for the views that show many (the table, the gallery): asked for by a view as
its rows come on screen, decoded in the background in batches of the latest rows asked for (app/thumbnails.py), kept
as pixmaps up to a bound, announced as they arrive (`ready(path, view_row)`) so the view repaints that row only."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QImage, QPixmap

from vitstudio.app.thumbnails import thumbnail_job

from .. import workers
from ..common.image_strip import letterboxed

THUMB = 48  # the table's thumbnails
THUMBS_KEPT = 4000  # about 37 MB of 48-px pixmaps: scrolling through 100k rows must not keep 100k
BATCH = 256  # the latest rows scrolled to; older wishes are asked for again if still on screen


class ThumbnailCache(QObject):
    ready = Signal(str, int)  # a path whose thumbnail arrived, the view row that asked for it

    def __init__(self, side: int, parent=None, letterbox: bool = False, kept: int = THUMBS_KEPT) -> None:
        super().__init__(parent)
        self.side, self.letterbox, self.kept = side, letterbox, kept
        self._pixmaps: dict[str, QPixmap | None] = {}
        self._wanted: dict[str, int] = {}
        self._loader = workers.KeyedSlot(workers.LONG)
        self._timer = QTimer(self, singleShot=True, interval=60, timeout=self._load_wanted)

    def get(self, path: str, view_row: int) -> QPixmap | None:
        """The thumbnail if decoded (None for an unreadable file), else None now and `ready` once it is."""
        if path in self._pixmaps:
            return self._pixmaps[path]
        self._wanted[path] = view_row
        if not self._timer.isActive():
            self._timer.start()
        return None

    def forget_wanted(self) -> None:
        """The rows asked for are gone (other results): nothing is announced for them."""
        self._wanted.clear()

    def _load_wanted(self) -> None:
        wanted = list(self._wanted)[-BATCH:]
        self._loader.start((tuple(wanted), self.side), "Thumbnails", thumbnail_job, wanted, self.side,
                           on_yield=self._on_thumbnail)

    def _on_thumbnail(self, item) -> None:
        path, array = item
        pixmap = None
        if array is not None:
            h, w, _ = array.shape
            pixmap = QPixmap.fromImage(QImage(array.tobytes(), w, h, 3 * w, QImage.Format_RGB888))
            if self.letterbox:  # small images (32-px digits) scaled up to the cell, aspect kept
                pixmap = letterboxed(pixmap, self.side)
        self._pixmaps[path] = pixmap
        if len(self._pixmaps) > self.kept:
            for old in list(self._pixmaps)[:len(self._pixmaps) - self.kept]:
                del self._pixmaps[old]
        row = self._wanted.pop(path, None)
        if row is not None:
            self.ready.emit(path, row)
