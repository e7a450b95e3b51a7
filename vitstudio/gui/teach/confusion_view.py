"""The Teach tab's confusion matrix on the held-out 15 %: rows the true class, columns the predicted one, each cell
its count; a cell clicked shows its images below the matrix (what the head gets wrong, where to record more)."""

from __future__ import annotations

from PIL import Image
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..imaging import pil_to_pixmap

ICON = 40
HINT = "Confusion on the held-out samples: click a cell to see its images."


class ConfusionView(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.result = None
        self.opened: tuple[str, str] | None = None  # the cell shown below, by its classes (true, predicted)
        self.table = QTableWidget()
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.cellClicked.connect(self.open_cell)
        self.caption = QLabel(HINT)
        self.caption.setWordWrap(True)
        self.images = QListWidget()
        self.images.setViewMode(QListWidget.IconMode)
        self.images.setIconSize(QSize(ICON, ICON))
        self.images.setFixedHeight(ICON + 24)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.table, self.caption, self.images):
            layout.addWidget(widget)

    def show_result(self, result) -> None:
        """The matrix of `result` (a TeachResult), or nothing (None: another model or project); the cell opened
        before shows the new result's images, or the hint when the classes changed (its caption named a cell of a
        list the refit had emptied)."""
        self.result = result
        self.images.clear()
        self.caption.setText(HINT)
        classes = list(result.classes) if result is not None else []
        self.table.setRowCount(len(classes))
        self.table.setColumnCount(len(classes))
        self.table.setVerticalHeaderLabels([f"is {c}" for c in classes])
        self.table.setHorizontalHeaderLabels([f"→ {c}" for c in classes])
        if result is None:
            self.opened = None
            return
        matrix = result.confusion
        for i in range(len(classes)):
            for j in range(len(classes)):
                item = QTableWidgetItem(str(int(matrix[i, j])))
                item.setTextAlignment(Qt.AlignCenter)
                if i != j and matrix[i, j]:
                    item.setBackground(Qt.yellow)
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        if self.opened is not None and set(self.opened) <= set(classes):
            self.open_cell(*(classes.index(name) for name in self.opened))

    def open_cell(self, row: int, column: int) -> None:
        self.images.clear()
        if self.result is None:
            return
        paths = self.result.cell_paths(row, column)
        true, predicted = self.opened = self.result.classes[row], self.result.classes[column]
        self.caption.setText(f"{len(paths)} held-out {true} predicted {predicted}")
        for path in paths:
            item = QListWidgetItem()
            item.setToolTip(path)
            try:
                with Image.open(path) as image:
                    image.thumbnail((ICON, ICON))
                    item.setIcon(QIcon(pil_to_pixmap(image)))
            except OSError:
                item.setText("?")
            self.images.addItem(item)
