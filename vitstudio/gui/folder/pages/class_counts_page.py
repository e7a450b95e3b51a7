"""The Counts page: a table of the images per class (predicted, given, both), drawn from its model."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from vitstudio.app.pages.class_counts import ClassCounts

COLUMNS = ("class", "predicted", "given", "both")


class ClassCountsPage(QWidget):
    page_id = "counts"

    def __init__(self, model: ClassCounts, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.summary = QLabel(model.summary())
        self.summary.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setSortIndicator(1, Qt.DescendingOrder)  # the model's order: most predicted
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        model.changed.connect(self.draw)

    def draw(self, rows) -> None:
        self.table.setSortingEnabled(False)  # rows are written where they belong, then sorted as the user chose
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            self.table.setItem(r, 0, QTableWidgetItem(row.name))
            for c, value in enumerate((row.predicted, row.given, row.agree), start=1):
                item = QTableWidgetItem()
                item.setData(Qt.DisplayRole, value)  # numbers sort as numbers
                self.table.setItem(r, c, item)
        self.table.setSortingEnabled(True)
        self.summary.setText(self.model.summary())


PAGE = ClassCountsPage
