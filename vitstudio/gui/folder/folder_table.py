"""The folder results table: a virtualised Qt model over `core.folder.results.FolderResults` (100k rows cost the
view only what is on screen), sorted and filtered with numpy, thumbnails decoded in the background for the rows
shown; the brain's four scores (uniqueness … mistakenness) as columns once the Folder model has them."""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QColor, QFont

from vitstudio.app.folder_scores import NAMES, about, missing

from .thumbnail_cache import THUMB, ThumbnailCache

COLUMNS = ("", "file", "predicted", "confidence", "given", "margin", *NAMES)
FIRST_SCORE = COLUMNS.index(NAMES[0])
ROLES = {Qt.DisplayRole, Qt.DecorationRole, Qt.ToolTipRole, Qt.FontRole, Qt.ForegroundRole, Qt.TextAlignmentRole}
DISAGREES = QColor(200, 30, 30)  # a QColor: a bare Qt.red is not converted to the brush the view asks for


class ResultsModel(QAbstractTableModel):
    """Rows shown = `rows` (source indices into the results, in display order). Filtering and sorting are numpy
    operations on whole columns that replace `rows`; the view then asks only for the rows on screen, so 100k
    images never cost 100k `data()` calls (a QSortFilterProxyModel sorts by calling data() for every row)."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.results = None  # the FolderResults shown
        self.scores = None  # FolderScores of the results' rows, or None (not computed yet)
        self.rows = np.zeros(0, int)
        self._allowed: np.ndarray | None = None
        self._sort: tuple[int, Qt.SortOrder] | None = None
        self._correct = np.zeros(0, int)
        self._ranks: dict[int, np.ndarray] = {}  # column -> each row's place in the whole folder sorted by it
        self.thumbs = ThumbnailCache(THUMB, self)
        self.thumbs.ready.connect(self._on_thumbnail)
        self.labelled: dict[str, str] = {}  # path -> the label given on the Labels tab (shown in bold as "given")

    def set_results(self, results, scores=None) -> None:  # a FolderResults or None
        self.results, self.scores = results, scores
        self._correct = results.correct() if results is not None else np.zeros(0, int)
        self.thumbs.forget_wanted()
        self._ranks = {}
        self._allowed = None
        self._refresh()

    def set_scores(self, scores) -> None:
        """The brain's scores of these results arrived (or went): sorted by one, the rows are ordered again; else
        only the score columns are drawn again (the selection stays)."""
        self.scores = scores
        for column in range(FIRST_SCORE, len(COLUMNS)):
            self._ranks.pop(column, None)
        if self._sort is not None and self._sort[0] >= FIRST_SCORE:
            self._refresh()
        elif len(self.rows):
            self.dataChanged.emit(self.index(0, FIRST_SCORE), self.index(len(self.rows) - 1, len(COLUMNS) - 1))
        self.headerDataChanged.emit(Qt.Horizontal, FIRST_SCORE, len(COLUMNS) - 1)

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
                rank = self._rank(column)
                if self._allowed is None:  # the whole folder: the ranks' inverse permutation, no sort at all
                    rows = np.empty_like(rank)
                    rows[rank] = np.arange(len(rank))
                else:
                    rows = rows[np.argsort(rank[rows])]  # ints: a stable sort by the column's keys
                if order == Qt.DescendingOrder:
                    rows = rows[::-1]
            self.rows = rows
        self.endResetModel()

    def _rank(self, column: int) -> np.ndarray:
        """(N,) each row's place when the whole folder is sorted by `column` (stable), made once per results: a filter
        or a sort then orders its rows by these ints (100k file names: 0.45 s to make, every refresh before)."""
        if column == 1:
            return self.results.name_rank  # made by the scan job, off the GUI thread
        if column not in self._ranks:
            rank = np.empty(len(self.results), np.int64)
            rank[np.argsort(self._sort_keys(column), kind="stable")] = np.arange(len(self.results))
            self._ranks[column] = rank
        return self._ranks[column]

    def _sort_keys(self, column: int) -> np.ndarray:
        res = self.results
        if column == 2:
            return res.predicted_labels()
        if column == 3:
            return res.confidence
        if column == 4:
            return np.asarray(res.given)
        if column == 5:
            return res.margin
        if column >= FIRST_SCORE:  # no score (NaN, or none yet) sorts below every score
            values = getattr(self.scores, COLUMNS[column]) if self.scores is not None else np.zeros(len(res))
            return np.where(np.isnan(values), -np.inf, values)
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
        if orientation == Qt.Horizontal and role == Qt.ToolTipRole and section >= FIRST_SCORE:
            return about(self.scores, COLUMNS[section])  # what it measures, and why it is empty where it is
        return None

    def data(self, index: QModelIndex, role=Qt.DisplayRole):
        res = self.results
        if res is None or role not in ROLES or index.row() >= len(self.rows):
            return None  # a view asks ~10 roles per cell it paints: those it draws nothing for cost nothing
        r, col = int(self.rows[index.row()]), index.column()
        if col >= FIRST_SCORE:
            return self._score(r, COLUMNS[col], role)
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

    def _score(self, row: int, name: str, role):
        if role == Qt.TextAlignmentRole:
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role not in (Qt.DisplayRole, Qt.ToolTipRole):
            return None
        value = np.nan if self.scores is None else float(getattr(self.scores, name)[row])
        if role == Qt.DisplayRole:
            return "" if np.isnan(value) else f"{value:.3f}"
        return f"{name} {value:.6f}" if not np.isnan(value) else f"No {name}: {missing(self.scores, name)}"

    # thumbnails: asked for by the view as rows come on screen, decoded off the GUI thread
    def _thumbnail(self, path: str, view_row: int):
        return self.thumbs.get(path, view_row)

    def _on_thumbnail(self, path: str, row: int) -> None:
        if row < len(self.rows) and self.results.paths[self.rows[row]] == path:
            self.dataChanged.emit(self.index(row, 0), self.index(row, 0), [Qt.DecorationRole])
