"""The folder results table: a virtualised Qt model over `core.folder.results.FolderResults` (100k rows cost the
view only what is on screen), sorted and filtered with numpy, thumbnails decoded in the background for the rows
shown."""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QImage, QPixmap

from vitstudio.core.folder.results import FolderResults

from .. import workers

COLUMNS = ("", "file", "predicted", "confidence", "given", "margin")
THUMB = 48
THUMBS_KEPT = 4000  # about 37 MB of pixmaps
DISAGREES = QColor(200, 30, 30)  # a QColor: a bare Qt.red is not converted to the brush the view asks for


def thumbnail_job(cancel, paths: list[str], side: int = THUMB):
    """The keyed-job form of `thumbnails` (inputs after the cancel token)."""
    return thumbnails(paths, cancel, side)


def thumbnails(paths: list[str], cancel, side: int = THUMB):
    """Runs in a worker: (path, RGB uint8 array ≤ `side` px) per file, None for unreadable ones."""
    from vitstudio.core.data.images import ImageReadError, read_image

    for path in paths:
        cancel.raise_if_cancelled()
        try:
            img = read_image(path)
            img.thumbnail((side, side))
            yield path, np.asarray(img.convert("RGB"))
        except ImageReadError:
            yield path, None


class ResultsModel(QAbstractTableModel):
    """Rows shown = `rows` (source indices into the results, in display order). Filtering and sorting are numpy
    operations on whole columns that replace `rows`; the view then asks only for the rows on screen, so 100k
    images never cost 100k `data()` calls (a QSortFilterProxyModel sorts by calling data() for every row)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.results: FolderResults | None = None
        self.rows = np.zeros(0, int)
        self._allowed: np.ndarray | None = None
        self._sort: tuple[int, Qt.SortOrder] | None = None
        self._correct = np.zeros(0, int)
        self._pixmaps: dict[str, QPixmap | None] = {}
        self._wanted: dict[str, int] = {}
        self._loader = workers.KeyedSlot(workers.LONG)
        self._timer = QTimer(self, singleShot=True, interval=60, timeout=self._load_wanted)
        self.labelled: dict[str, str] = {}  # path -> the label given on the Labels tab (shown in bold as "given")

    def set_results(self, results: FolderResults | None) -> None:
        self.results = results
        self._correct = results.correct() if results is not None else np.zeros(0, int)
        self._wanted.clear()
        self._allowed = None
        self._refresh()

    def show_labels(self, labels: dict[str, str]) -> None:
        """The Labels tab's labels: each labelled row shows its label, in bold, as given (there was no marker of which
        rows were labelled)."""
        self.labelled = dict(labels)
        if len(self.rows):
            self.dataChanged.emit(self.index(0, 4), self.index(len(self.rows) - 1, 4))

    def set_allowed(self, rows) -> None:
        """Show only these source rows (None: all), in the current sort order."""
        self._allowed = None if rows is None else np.asarray(rows, int)
        self._refresh()

    def sort(self, column: int, order=Qt.AscendingOrder) -> None:
        self._sort = (column, order)
        self._refresh()

    def _refresh(self) -> None:
        self.beginResetModel()
        res = self.results
        if res is None:
            self.rows = np.zeros(0, int)
        else:
            rows = np.arange(len(res)) if self._allowed is None else self._allowed
            if self._sort is not None and len(rows):
                column, order = self._sort
                keys = self._sort_keys(column)[rows]
                rows = rows[np.argsort(keys, kind="stable")]
                if order == Qt.DescendingOrder:
                    rows = rows[::-1]
            self.rows = rows
        self.endResetModel()

    def _sort_keys(self, column: int) -> np.ndarray:
        res = self.results
        if column == 1:
            return np.asarray([os.path.basename(p) for p in res.paths])
        if column == 2:
            return res.predicted_labels()
        if column == 3:
            return res.confidence
        if column == 4:
            return np.asarray(res.given)
        if column == 5:
            return res.margin
        return np.arange(len(res))

    def source_row(self, view_row: int) -> int:
        return int(self.rows[view_row])

    def view_row(self, source_row: int) -> int | None:
        found = np.nonzero(self.rows == source_row)[0]
        return int(found[0]) if len(found) else None

    def rowCount(self, parent: QModelIndex | None = None) -> int:  # noqa: N802 (Qt's name)
        return 0 if (parent is not None and parent.isValid()) else len(self.rows)

    def columnCount(self, parent: QModelIndex | None = None) -> int:  # noqa: N802
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.DisplayRole):  # noqa: N802
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex, role=Qt.DisplayRole):
        res = self.results
        if res is None or index.row() >= len(self.rows):
            return None
        r, col = int(self.rows[index.row()]), index.column()
        if role == Qt.DecorationRole and col == 0:
            return self._thumbnail(res.paths[r], index.row())
        if role == Qt.DisplayRole:
            scores = (f"{res.confidence[r]:.1%}", f"{res.margin[r]:.2f}") if res.has_predictions else ("", "")
            given = self.labelled.get(res.paths[r], res.given[r])
            return (None, os.path.basename(res.paths[r]), res.predicted_label(r), scores[0], given, scores[1])[col]
        if role == Qt.ToolTipRole:
            labelled = "\nlabelled on the Labels tab" if col == 4 and res.paths[r] in self.labelled else ""
            return res.paths[r] + labelled
        if role == Qt.FontRole and col == 4 and res.paths[r] in self.labelled:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ForegroundRole and col == 4 and self._correct[r] == 0:
            return DISAGREES  # the folder says otherwise
        return None

    # thumbnails: asked for by the view as rows come on screen, decoded off the GUI thread
    def _thumbnail(self, path: str, view_row: int):
        if path in self._pixmaps:
            return self._pixmaps[path]
        self._wanted[path] = view_row
        if not self._timer.isActive():
            self._timer.start()
        return None

    def _load_wanted(self) -> None:
        wanted = list(self._wanted)[-256:]  # the latest rows scrolled to
        self._loader.start(tuple(wanted), "Thumbnails", thumbnail_job, wanted, THUMB, on_yield=self._on_thumbnail)

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
        if row is not None and row < len(self.rows) and self.results.paths[self.rows[row]] == path:
            self.dataChanged.emit(self.index(row, 0), self.index(row, 0), [Qt.DecorationRole])
