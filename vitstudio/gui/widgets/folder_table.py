"""The folder results table: a virtualised Qt model over `core.folder.results.FolderResults` (100k rows cost the
view only what is on screen), thumbnails decoded in the background for the rows shown, and a filter proxy."""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, QTimer
from PySide6.QtGui import QImage, QPixmap

from vitstudio.core.folder.results import FolderResults

from .. import workers

COLUMNS = ("", "file", "predicted", "confidence", "given", "margin")
THUMB = 48
THUMBS_KEPT = 4000  # about 37 MB of pixmaps


def thumbnails(paths: list[str], cancel):
    """Runs in a worker: (path, RGB uint8 array ≤ THUMB px) per file, None for unreadable ones."""
    from vitstudio.core.data.images import ImageReadError, read_image

    for path in paths:
        cancel.raise_if_cancelled()
        try:
            img = read_image(path)
            img.thumbnail((THUMB, THUMB))
            yield path, np.asarray(img.convert("RGB"))
        except ImageReadError:
            yield path, None


class ResultsModel(QAbstractTableModel):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.results: FolderResults | None = None
        self._correct = np.zeros(0, int)
        self._pixmaps: dict[str, QPixmap | None] = {}
        self._wanted: dict[str, int] = {}
        self._loader = workers.LatestJob(workers.LONG)
        self._timer = QTimer(self, singleShot=True, interval=60, timeout=self._load_wanted)

    def set_results(self, results: FolderResults | None) -> None:
        self.beginResetModel()
        self.results = results
        self._correct = results.correct() if results is not None else np.zeros(0, int)
        self._wanted.clear()
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | None = None) -> int:  # noqa: N802 (Qt's name)
        return 0 if (parent is not None and parent.isValid()) or self.results is None else len(self.results)

    def columnCount(self, parent: QModelIndex | None = None) -> int:  # noqa: N802
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.DisplayRole):  # noqa: N802
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex, role=Qt.DisplayRole):
        r, col, res = index.row(), index.column(), self.results
        if res is None:
            return None
        if role == Qt.DecorationRole and col == 0:
            return self._thumbnail(res.paths[r], r)
        if role == Qt.DisplayRole:
            return (None, os.path.basename(res.paths[r]), res.predicted_label(r), f"{res.confidence[r]:.1%}",
                    res.given[r], f"{res.margin[r]:.2f}")[col]
        if role == Qt.UserRole:  # what the proxy sorts by
            return (r, res.paths[r], res.predicted_label(r), float(res.confidence[r]), res.given[r],
                    float(res.margin[r]))[col]
        if role == Qt.ToolTipRole:
            return res.paths[r]
        if role == Qt.ForegroundRole and col == 4 and self._correct[r] == 0:
            return Qt.red  # the folder says otherwise
        return None

    # thumbnails: asked for by the view as rows come on screen, decoded off the GUI thread
    def _thumbnail(self, path: str, row: int):
        if path in self._pixmaps:
            return self._pixmaps[path]
        self._wanted[path] = row
        if not self._timer.isActive():
            self._timer.start()
        return None

    def _load_wanted(self) -> None:
        wanted = list(self._wanted)[-256:]  # the latest rows scrolled to
        self._loader.start("Thumbnails", lambda cancel: thumbnails(wanted, cancel), on_yield=self._on_thumbnail)

    def _on_thumbnail(self, item) -> None:
        path, array = item
        pixmap = None
        if array is not None:
            h, w, _ = array.shape
            pixmap = QPixmap.fromImage(QImage(array.tobytes(), w, h, 3 * w, QImage.Format_RGB888))
        self._pixmaps[path] = pixmap
        if len(self._pixmaps) > THUMBS_KEPT:  # scrolling through 100k rows must not keep 100k pixmaps
            for old in list(self._pixmaps)[:len(self._pixmaps) - THUMBS_KEPT]:
                del self._pixmaps[old]
        row = self._wanted.pop(path, None)
        if row is not None and self.results is not None and row < len(self.results):
            self.dataChanged.emit(self.index(row, 0), self.index(row, 0), [Qt.DecorationRole])


class ResultsFilter(QSortFilterProxyModel):
    """Rows kept: those in `allowed` (None: all), e.g. the result of FolderResults.select or a map selection."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.allowed: set[int] | None = None
        self.setSortRole(Qt.UserRole)

    def set_allowed(self, rows) -> None:
        if hasattr(self, "endFilterChange"):  # Qt ≥ 6.10: invalidateFilter() is deprecated
            self.beginFilterChange()
            self.allowed = None if rows is None else {int(r) for r in rows}
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self.allowed = None if rows is None else {int(r) for r in rows}
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent) -> bool:  # noqa: N802
        return self.allowed is None or row in self.allowed
