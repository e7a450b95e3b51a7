"""The Folder tab's gallery: the rows the table shows — the same filters, in the same order (it reads the table's
rows) — as a grid of thumbnails with each image's prediction, confidence and tags under it (red where its folder
says otherwise) and its flags over the thumbnail's corner: ⚠ unlike the model's training data (the model fit's
out-of-distribution flag), ? a label the review doubts (the review list's rule: flagged by cleanlab, or the probe
suggests another class). Virtualised: a QListView in icon mode over a list model asks only for the cells on
screen, and only their thumbnails are decoded, in the background (thumbnail_cache.py). Beside it, a Table | Gallery
switch (bound to the Folder state's `gallery`) and, for the gallery, the table's sort as a list (the table's header
is hidden)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractListModel, QItemSelectionModel, QModelIndex, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QPushButton,
    QStackedWidget,
    QStyledItemDelegate,
    QVBoxLayout,
    QWidget,
)

from .folder_map import describe_image
from .folder_table import COLUMNS, DISAGREES
from .thumbnail_cache import ThumbnailCache

ICON = 72  # a 32-px digit is scaled up to it, a photo's thumbnail decoded at it: 3 columns in the ~320 px the
# Folder tab leaves the grid at 1280×720 with the model card open
CELL = QSize(ICON + 14, ICON + 26)  # the thumbnail and one line of caption
BATCH = 2000  # cells laid out per turn of the event loop (~15 ms)
ITEM = CELL - QSize(6, 6)  # every item's size, given before its thumbnail arrives (else it is laid out text-high)
FLAGS_ROLE = Qt.UserRole + 1  # a cell's flags: a tuple of FLAGS' keys
FLAGS = {"unlike": ("⚠", QColor(230, 120, 0), "unlike the model's training data (out of distribution)"),
         "doubted": ("?", QColor(130, 60, 200), "the label review doubts its label")}
SORTS = [(column, order, f"{COLUMNS[column]} {'↑' if order == Qt.AscendingOrder else '↓'}")
         for column in range(1, len(COLUMNS)) for order in (Qt.AscendingOrder, Qt.DescendingOrder)]


def caption(results, row: int, tags=()) -> str:
    """What a cell says under its picture: the prediction and its confidence (the given label without a head), then
    the image's tags."""
    said = (results.given[row] or "–") if not results.has_predictions else (
        f"{results.predicted_label(row)} {results.confidence[row]:.0%}")
    return " ".join((said, *(f"#{t}" for t in sorted(tags))))


class GalleryModel(QAbstractListModel):
    """One item per row the table shows (`table_model.rows`, in its order); reset with the table's model."""

    # captions or flags changed, not the items: the view repaints the cells on screen (a dataChanged over 100k rows
    # made the view walk all of them: ~0.1 s of the GUI thread per tag or flag update)
    repaint_cells = Signal()

    def __init__(self, table_model, parent=None) -> None:
        super().__init__(parent)
        self.table_model = table_model
        self.thumbs = ThumbnailCache(ICON, self, letterbox=True)
        self.thumbs.ready.connect(self._on_thumbnail)
        self._results, self._correct = None, np.zeros(0, int)
        self._count = 0  # rows: asked once per item by the view's layout (QAbstractListModel.index → hasIndex)
        self.tags: list[set[str]] = []  # per row of the results (FolderTags.tags): shown in the captions
        self.unlike = np.zeros(0, bool)  # per row of the results: the model fit's out-of-distribution flag
        self.doubted: dict[int, str] = {}  # row -> the class the label review suggests instead of its given one
        table_model.modelAboutToBeReset.connect(self.beginResetModel)  # then `_reset`
        table_model.modelReset.connect(self._reset)

    def _reset(self) -> None:
        self.thumbs.forget_wanted()
        self._count = len(self.table_model.rows)
        results = self.table_model.results
        if results is not self._results:
            self._results = results
            self._correct = results.correct() if results is not None else np.zeros(0, int)
            if results is None:  # another folder or model: its flags go with it (a move keeps rows and flags)
                self.unlike, self.doubted = np.zeros(0, bool), {}
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | None = None) -> int:  # noqa: N802 (Qt's name)
        return self._count if parent is None or not parent.isValid() else 0

    def source_row(self, view_row: int) -> int:
        return self.table_model.source_row(view_row)

    def data(self, index: QModelIndex, role=Qt.DisplayRole):
        res, rows = self.table_model.results, self.table_model.rows
        if res is None or not 0 <= index.row() < len(rows):
            return None
        r = int(rows[index.row()])
        if role == Qt.DecorationRole:
            return self.thumbs.get(res.paths[r], index.row())
        if role == Qt.DisplayRole:
            return caption(res, r, self.tags[r] if r < len(self.tags) else ())
        if role == FLAGS_ROLE:
            return tuple(f for f, on in (("unlike", r < len(self.unlike) and self.unlike[r]),
                                         ("doubted", r in self.doubted)) if on)
        if role == Qt.ToolTipRole:
            flags = [FLAGS[f][2] + (f": looks like {self.doubted[r]}" if f == "doubted" else "")
                     for f in self.data(index, FLAGS_ROLE)]
            return "\n".join([describe_image(res, r), *flags])
        if role == Qt.SizeHintRole:
            return ITEM
        if role == Qt.ForegroundRole and self._correct[r] == 0:
            return DISAGREES
        return None

    def show_tags(self, tags: list[set[str]]) -> None:
        """The folder's tags per row (the captions name them)."""
        had, self.tags = any(self.tags), tags
        if had or any(tags):  # untagged before and after: nothing to repaint
            self.repaint_cells.emit()

    def show_fit(self, fit) -> None:
        """The model fit's out-of-distribution flags (FolderFit, per row of the results)."""
        self.unlike = np.asarray(fit.scores.flagged, bool)
        self.repaint_cells.emit()

    def show_review(self, report) -> None:
        """The label review's doubted images (AuditReport.label_issues, by path)."""
        rows = {p: i for i, p in enumerate(self._results.paths)} if self._results is not None else {}
        self.doubted = {rows[i.path]: i.suggested for i in report.label_issues
                        if (i.flagged or i.suggested != i.given) and i.path in rows}
        self.repaint_cells.emit()

    def _on_thumbnail(self, path: str, row: int) -> None:
        res, rows = self.table_model.results, self.table_model.rows
        if res is not None and row < len(rows) and res.paths[rows[row]] == path:
            index = self.index(row, 0)
            self.dataChanged.emit(index, index, [Qt.DecorationRole])


class FlagsDelegate(QStyledItemDelegate):
    """A cell as the view draws it, then its flags as small discs over the thumbnail's top-left corner."""

    def paint(self, painter, option, index) -> None:
        super().paint(painter, option, index)
        flags = index.data(FLAGS_ROLE)
        if not flags:
            return
        painter.save()
        painter.setRenderHint(painter.RenderHint.Antialiasing)
        for i, flag in enumerate(flags):
            glyph, colour, _words = FLAGS[flag]
            disc = QRect(option.rect.left() + 3 + i * 17, option.rect.top() + 3, 15, 15)
            painter.setPen(Qt.NoPen)
            painter.setBrush(colour)
            painter.drawEllipse(disc)
            painter.setPen(Qt.white)
            painter.drawText(disc, Qt.AlignCenter, glyph)
        painter.restore()


class FolderGalleryView(QListView):
    row_picked = Signal(int)  # the source row the user made current

    def __init__(self, table_model, parent=None) -> None:
        super().__init__(parent)
        self.setViewMode(QListView.IconMode)
        self.setFlow(QListView.LeftToRight)
        self.setWrapping(True)
        self.setResizeMode(QListView.Adjust)
        self.setMovement(QListView.Static)
        self.setUniformItemSizes(True)  # one size for every cell: 100k items are laid out without asking each
        self.setLayoutMode(QListView.Batched)  # 100k cells placed a batch per turn of the event loop: the first
        self.setBatchSize(BATCH)  # screen is drawn at once, the scroll bar grows as the rest are placed
        self.setGridSize(CELL)
        self.setIconSize(QSize(ICON, ICON))
        self.setTextElideMode(Qt.ElideRight)
        self.setSelectionMode(QAbstractItemView.ExtendedSelection)  # as the table's: one selection (the App's)
        self.gallery_model = GalleryModel(table_model, self)
        self.setModel(self.gallery_model)
        self.setItemDelegate(FlagsDelegate(self))
        self.gallery_model.repaint_cells.connect(self.viewport().update)
        self.selectionModel().currentChanged.connect(self._on_current)

    def _on_current(self, current, _previous) -> None:
        if current.isValid():
            self.row_picked.emit(self.gallery_model.source_row(current.row()))

    def show_row(self, source_row: int) -> None:
        """Make `source_row` current (the row selected elsewhere: the table, the map), scrolled to; nothing when the
        filters hide it. What is selected stays the App's (the table's multi-selection: folder_row_selection.py)."""
        view_row = self.gallery_model.table_model.view_row(source_row)
        if view_row is None:
            return
        index = self.gallery_model.index(view_row, 0)
        if index != self.currentIndex():
            self.selectionModel().setCurrentIndex(index, QItemSelectionModel.NoUpdate)
        self.scrollTo(index)


class TableOrGalleryWidget(QWidget):
    """The table or the gallery of the same rows; `gallery_button` is bound to the Folder state's `gallery`."""

    def __init__(self, table, table_model, parent=None) -> None:
        super().__init__(parent)
        self.table = table
        self.gallery = FolderGalleryView(table_model)
        self.table_button = QPushButton("Table", checkable=True, checked=True)
        self.gallery_button = QPushButton("Gallery", checkable=True)
        self.gallery_button.setToolTip("The images shown as a grid of thumbnails, with the prediction and its "
                                       "confidence under each: the table's rows, filters and order")
        group = QButtonGroup(self)  # exclusive: checking one unchecks the other (the bound one says which)
        group.addButton(self.table_button)
        group.addButton(self.gallery_button)
        self.sort = QComboBox()  # narrow: its longest entry ("representativeness ↓") made the Folder tab wider
        self.sort.setMaximumWidth(96)  # than 1280 px in gallery mode; the list opens as wide as its entries
        self.sort.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)  # "representativeness ↓"
        self.sort.setMinimumContentsLength(8)  # widened the tab at 1280×720; the list shows every name whole
        for _column, _order, text in SORTS:
            self.sort.addItem(text)
        self.sort.activated.connect(self._sort_chosen)  # the user's choice only: the header's changes show below
        self.table_model = table_model
        table_model.headerDataChanged.connect(self._sort_tips)  # a score's entry says why its column is empty
        self._sort_tips()
        table.horizontalHeader().sortIndicatorChanged.connect(self._show_sort)
        self.sort_label = QLabel("Sort")  # short: the row fits the ~320 px the grid gets at 1280×720
        self.stack = QStackedWidget()
        self.stack.addWidget(table)
        self.stack.addWidget(self.gallery)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for w in (self.table_button, self.gallery_button, self.sort_label, self.sort):
            row.addWidget(w)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.stack, 1)
        self._show_sort(*self._indicator())
        self.show_gallery(False)

    def show_gallery(self, shown: bool) -> None:
        self.stack.setCurrentWidget(self.gallery if shown else self.table)
        self.table_button.setChecked(not shown)
        for w in (self.sort_label, self.sort):  # the table sorts by its header
            w.setVisible(shown)

    def _sort_tips(self, *_changed) -> None:
        """Each entry's tooltip: its column header's (for a score, what it measures and why it is empty where it is)."""
        for i, (column, _order, _text) in enumerate(SORTS):
            self.sort.setItemData(i, self.table_model.headerData(column, Qt.Horizontal, Qt.ToolTipRole), Qt.ToolTipRole)

    def _indicator(self):
        header = self.table.horizontalHeader()
        return header.sortIndicatorSection(), header.sortIndicatorOrder()

    def _sort_chosen(self, index: int) -> None:
        column, order, _text = SORTS[index]
        self.table.sortByColumn(column, order)  # one sort: the table's (its header shows it too)

    def _show_sort(self, column: int, order) -> None:
        found = [i for i, (c, o, _t) in enumerate(SORTS) if (c, o) == (column, order)]
        if found:
            self.sort.setCurrentIndex(found[0])
