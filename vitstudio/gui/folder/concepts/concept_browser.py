"""Every concept of a concepts file: a sortable table (how often it fires, on how many images, how strongly, its
classes), the chosen concept's top patches across the folder (the crop with the patch outlined, the image's name),
and a 2-D map of the concepts' directions (PCA) where a click chooses a concept."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.concept_jobs import crops_job
from vitstudio.app.folder_states import SORTS, sorts_for

from ... import workers
from ...common.bind import bind
from ...common.small_plot import SmallPlotWidget
from ...imaging import pil_to_pixmap

COLUMNS = ("Concept", "Fires", "Images", "Mean", "Top class")
TOP_SHOWN = 8


class _Number(QTableWidgetItem):
    """A cell that sorts by its number, not its text."""

    def __init__(self, text: str, value: float) -> None:
        super().__init__(text)
        self.setData(Qt.UserRole, float(value))

    def __lt__(self, other) -> bool:
        return self.data(Qt.UserRole) < other.data(Qt.UserRole)


class ConceptBrowserWidget(QWidget):
    concept_selected = Signal(int)

    def __init__(self, tab, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.shown: int | None = None  # the concept whose patches are shown (a row selected for it asks nothing)
        self.tab = tab
        self.concepts = None
        self.crops = workers.KeyedSlot()
        self.sort = QComboBox()  # its items: the sort field's choices (bind), which follow the concepts' classes
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setMinimumHeight(88)
        for column, width in enumerate((64, 72, 60, 56)):
            self.table.setColumnWidth(column, width)
        self.top = QListWidget()  # one row of crops, scrolled sideways: the table keeps the height
        self.top.setViewMode(QListView.IconMode)
        self.top.setFlow(QListView.LeftToRight)
        self.top.setWrapping(False)
        self.top.setIconSize(QSize(56, 56))
        self.top.setGridSize(QSize(80, 88))
        self.top.setFixedHeight(104)
        self.top_note = QLabel()
        self.top_note.setWordWrap(True)
        self.map = SmallPlotWidget()  # its own page of the Concepts page (pages/concepts_page.py)
        self.map.setToolTip("Each concept's direction, projected on the first two principal components of all of "
                            "them; click one to choose it")
        self.map.hideAxis("left")
        self.map.hideAxis("bottom")
        self.points = pg.ScatterPlotItem(size=5, brush=pg.mkBrush(90, 120, 200, 160), pen=None)
        self.chosen = pg.ScatterPlotItem(size=12, brush=pg.mkBrush(255, 80, 0), pen=pg.mkPen("k"))
        self.map.addItem(self.points)
        self.map.addItem(self.chosen)
        row = QHBoxLayout()
        row.addWidget(QLabel("Sort by"))
        row.addWidget(self.sort, 1)
        box = QVBoxLayout(self)
        box.addWidget(self.top_note)  # the chosen concept first, then every concept
        box.addWidget(self.top)
        box.addLayout(row)
        box.addWidget(self.table, 1)
        bind(self.sort, tab.view_state, "sort")
        tab.view_state.events.sort.connect(self._sort)
        self.table.itemSelectionChanged.connect(self._on_row)
        self.points.sigClicked.connect(self._on_point)

    def set_concepts(self, concepts) -> None:
        self.concepts = concepts
        rows = concepts.stats.get("concepts", []) if concepts is not None else []
        classes = concepts.stats.get("classes", []) if concepts is not None else []
        self.tab.view_state.redeclare("sort", **sorts_for(classes))
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            means = row.get("class_means") or []
            best = classes[int(np.argmax(means))] if means and max(means) > 0 else ""
            cells = (_Number(str(row["index"]), row["index"]), _Number(f"{100 * row['frequency']:.2f} %",
                     row["frequency"]), _Number(str(row["images"]), row["images"]),
                     _Number(f"{row['mean_activation']:.3g}", row["mean_activation"]), QTableWidgetItem(best))
            for c, cell in enumerate(cells):
                self.table.setItem(r, c, cell)
        self.table.setSortingEnabled(True)
        xy = np.asarray(concepts.stats.get("map", []), float) if concepts is not None else np.zeros((0, 2))
        self.points.setData(pos=xy if len(xy) else np.zeros((0, 2)), data=np.arange(len(xy)))
        self._sort()

    def _sort(self, *_args) -> None:
        if self.concepts is None:
            self.show_concept(None)
            return
        choice = self.tab.view_state.sort
        if choice < len(SORTS):
            self.table.sortItems((1, 2, 3)[choice], Qt.DescendingOrder)
            return
        rows = self.concepts.stats["concepts"]  # a class: its mean strength on that class's images, as a column
        self.table.setSortingEnabled(False)
        for r in range(self.table.rowCount()):
            index = int(self.table.item(r, 0).data(Qt.UserRole))
            value = (rows[index].get("class_means") or [0.0] * (choice + 1))[choice - len(SORTS)]
            self.table.setItem(r, 3, _Number(f"{value:.3g}", value))
        label = self.tab.view_state.fields()["sort"].labels[choice]
        self.table.setHorizontalHeaderItem(3, QTableWidgetItem(f"Mean on {label.removeprefix('class: ')}"))
        self.table.setSortingEnabled(True)
        self.table.sortItems(3, Qt.DescendingOrder)

    def _on_row(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows and (index := int(self.table.item(rows[0].row(), 0).data(Qt.UserRole))) != self.shown:
            self.concept_selected.emit(index)

    def _on_point(self, _item, points, *_args) -> None:
        if len(points):
            self.concept_selected.emit(int(points[0].data()))

    def _select_row(self, index: int) -> None:
        """The table's row of concept `index` selected, without asking for it again."""
        for r in range(self.table.rowCount()):
            if int(self.table.item(r, 0).data(Qt.UserRole)) == index:
                self.table.selectRow(r)  # `_on_row` hears it: the concept shown already, nothing asked again
                self.table.scrollToItem(self.table.item(r, 0))
                return

    def show_concept(self, index: int | None) -> None:
        """The concept's top patches and its place on the map (None: nothing chosen)."""
        self.shown = index
        self.top.clear()
        if self.concepts is None or index is None or not 0 <= index < self.concepts.size:
            self.chosen.setData(pos=np.zeros((0, 2)))
            self.top_note.setText("Choose a concept (a row, or a point on the Map) to see where it is strongest.")
            return
        self._select_row(index)
        xy = self.concepts.stats.get("map") or []
        self.chosen.setData(pos=np.asarray([xy[index]], float) if index < len(xy) else np.zeros((0, 2)))
        row = self.concepts.stats["concepts"][index]
        self.top_note.setText(f"Concept {index}: fires on {100 * row['frequency']:.2f} % of the patches, on "
                              f"{row['images']} images; where it is strongest:")
        tops = tuple((t["path"], tuple(t["patch"]), t["activation"]) for t in row["top_images"][:TOP_SHOWN])
        model = self.tab.model.app.model
        if model is not None and tops:
            self.crops.start((model.uid, index, tops), "Reading top patches", crops_job, model, tops,
                             on_result=self._on_crops)

    def _on_crops(self, crops) -> None:
        self.top.clear()
        for crop, caption in crops:
            item = QListWidgetItem(QIcon(pil_to_pixmap(crop)), caption)
            item.setToolTip(caption.split("\n")[0])
            self.top.addItem(item)
