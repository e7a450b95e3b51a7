"""What a finished run shows: confusion matrix, per-class table, misclassified gallery."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QAbstractScrollArea,
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

from ..common.map_view import lookup_table
from ..imaging import pil_to_pixmap

GALLERY_MAX = 200


def make_thumbnails(report) -> dict:
    """Runs in a worker: small pictures of the misclassified images for the gallery."""
    from vitstudio.core.data.images import ImageReadError, read_image

    out = {}
    for wrong in report.misclassified[:GALLERY_MAX]:
        try:
            thumb = read_image(wrong.path)
        except ImageReadError:
            continue
        thumb.thumbnail((64, 64))
        out[wrong.path] = thumb
    return out


class RunResultsWidget(QWidget):
    misclassified_clicked = Signal(str)  # image path

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report = None
        self.summary = QLabel("No results yet.")
        self.confusion = pg.GraphicsLayoutWidget()
        self.confusion.setMinimumSize(170, 170)
        self.cm_view = self.confusion.addPlot(title="Confusion")  # a longer title widened the plot past its pane
        self.cm_view.setLabel("bottom", "predicted")
        self.cm_view.setLabel("left", "true")
        self.cm_view.invertY(True)
        self.cm_view.setMouseEnabled(False, False)  # a fixed, whole matrix; cells need not be square
        self.cm_item = pg.ImageItem()
        self.cm_view.addItem(self.cm_item)
        self.table = QTableWidget(0, 5)
        # short headers (their full names as tooltips): the five columns fit beside the matrix in a 400 px pane
        for column, (short, full) in enumerate((("class", "class"), ("prec.", "precision"), ("recall", "recall"),
                                                ("F1", "F1 score"), ("n", "support: validation images"))):
            header = QTableWidgetItem(short)
            header.setToolTip(full)
            self.table.setHorizontalHeaderItem(column, header)
        self.table.verticalHeader().setVisible(False)
        # as wide as its columns (precision … support never clip); the confusion matrix takes what is left
        self.table.setSizeAdjustPolicy(QAbstractScrollArea.AdjustToContents)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.gallery = QListWidget()
        self.gallery.setViewMode(QListView.IconMode)
        self.gallery.setIconSize(QSize(64, 64))
        self.gallery.setResizeMode(QListView.Adjust)
        self.gallery.itemActivated.connect(self._on_item)
        self.gallery.itemClicked.connect(self._on_item)
        row = QHBoxLayout()
        row.addWidget(self.confusion, 1)
        row.addWidget(self.table, 0)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addLayout(row, 2)
        layout.addWidget(QLabel("Misclassified validation images (click one to explore its attention):"))
        layout.addWidget(self.gallery, 1)

    def show_report(self, report, thumbnails: dict | None = None) -> None:
        """thumbnails: path -> small PIL image, made off the GUI thread (see make_thumbnails)."""
        self.report = report
        self.cm_view.clear()
        self.cm_item = pg.ImageItem()
        self.cm_view.addItem(self.cm_item)
        self.table.setRowCount(0)
        self.gallery.clear()
        if report is None:
            self.summary.setText("No results yet.")
            return
        cm = report.confusion.astype(np.float32)
        self.cm_item.setImage(cm, levels=(0, max(1.0, float(cm.max()))), lut=lookup_table("viridis"))
        n = len(report.classes)
        if n <= 20:  # counts written in the cells
            for r in range(n):
                for c in range(n):
                    text = pg.TextItem(str(int(cm[r, c])), anchor=(0.5, 0.5),
                                       color="w" if cm[r, c] < cm.max() / 2 else "k")
                    text.setPos(c + 0.5, r + 0.5)
                    self.cm_view.addItem(text)
        ticks = [(i + 0.5, name[:12]) for i, name in enumerate(report.classes)]
        self.cm_view.getAxis("bottom").setTicks([ticks])
        self.cm_view.getAxis("left").setTicks([ticks])
        self.cm_view.setRange(xRange=(0, n), yRange=(0, n), padding=0)
        rows = report.per_class()
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            values = [row["class"], f"{row['precision']:.3f}", f"{row['recall']:.3f}", f"{row['f1']:.3f}",
                      str(row["support"])]
            for j, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setFlags(item.flags() & ~Qt.ItemIsEditable)
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self.summary.setText(f"Validation accuracy {report.accuracy * 100:.2f} % on {int(cm.sum())} images, "
                             f"{len(report.misclassified)} misclassified.")
        for wrong in report.misclassified[:GALLERY_MAX]:
            item = QListWidgetItem(f"{report.classes[wrong.true]} → {report.classes[wrong.predicted]}")
            item.setToolTip(f"{wrong.path}\npredicted {report.classes[wrong.predicted]} ({wrong.prob * 100:.1f}%)")
            item.setData(Qt.UserRole, wrong.path)
            thumb = (thumbnails or {}).get(wrong.path)
            if thumb is not None:
                item.setIcon(QIcon(pil_to_pixmap(thumb)))
            self.gallery.addItem(item)

    def _on_item(self, item: QListWidgetItem) -> None:
        self.misclassified_clicked.emit(item.data(Qt.UserRole))
