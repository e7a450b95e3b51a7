"""What a finished run shows: confusion matrix, per-class table, misclassified gallery."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon
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

from vitstudio.app.training_jobs import GALLERY_MAX, THUMB

from ..common.map_view import lookup_table
from ..imaging import pil_to_pixmap


class CellCounts(pg.GraphicsObject):
    """Every cell's count written in one paint, at the same size however the matrix is scaled. A TextItem per
    cell (100 for ten classes) cost the GUI thread ~0.4 s to make and place, the longest stall of a session."""

    MAX_CLASSES = 20  # more cells than this are too small for their counts

    def __init__(self) -> None:
        super().__init__()
        self.counts = np.zeros((0, 0), np.int64)

    def set_counts(self, counts: np.ndarray) -> None:
        self.prepareGeometryChange()
        self.counts = np.asarray(counts, np.int64) if len(counts) <= self.MAX_CLASSES else np.zeros((0, 0))
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt's name)
        rows, columns = self.counts.shape
        return QRectF(0, 0, columns, rows)

    def paint(self, painter, *_args) -> None:
        if not self.counts.size:
            return
        to_screen = painter.transform()
        painter.resetTransform()  # text in screen pixels, centred on each cell
        half = self.counts.max() / 2
        cell = to_screen.map(QPointF(1, 1)) - to_screen.map(QPointF(0, 0))
        digits = len(str(self.counts.max()))
        font = painter.font()  # as large as fits a cell, at most the UI's own size ("1234" in a 20 px cell)
        font.setPixelSize(max(6, int(min(abs(cell.y()) * 0.6, abs(cell.x()) / (0.62 * digits + 0.2), 13))))
        painter.setFont(font)
        for (r, c), count in np.ndenumerate(self.counts):
            centre = to_screen.map(QPointF(c + 0.5, r + 0.5))
            painter.setPen(QColor("white" if count < half else "black"))
            painter.drawText(QRectF(centre.x() - 40, centre.y() - 10, 80, 20), Qt.AlignCenter, str(count))


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
        self.cm_counts = CellCounts()
        self.cm_view.addItem(self.cm_counts)
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
        self.gallery.setIconSize(QSize(THUMB, THUMB))
        # one fixed cell per image, its picture or not: captions are laid out before the thumbnails arrive, and an
        # icon view sizes each item from its content once, so a later icon would draw over its neighbours
        lines = self.gallery.fontMetrics().lineSpacing()
        self.gallery_cell = QSize(THUMB + 44, THUMB + 2 * lines + 6)
        self.gallery.setGridSize(self.gallery_cell + QSize(4, 4))
        self.gallery.setUniformItemSizes(True)
        self.gallery.setWordWrap(True)  # a long "class → class" wraps inside its cell; the tooltip has it whole
        self.gallery.setMovement(QListView.Static)
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

    def show_report(self, report) -> None:
        """The matrix, the table and the gallery's captions at once; `show_thumbnails` adds the pictures."""
        self.report = report
        self.table.setRowCount(0)
        self.gallery.clear()
        if report is None:
            self.cm_item.clear()
            self.cm_counts.set_counts(np.zeros((0, 0)))
            for side in ("bottom", "left"):  # the previous run's class names go with it
                self.cm_view.getAxis(side).setTicks([[]])
            self.summary.setText("No results yet.")
            return
        cm = report.confusion.astype(np.float32)
        self.cm_item.setImage(cm, levels=(0, max(1.0, float(cm.max()))), lut=lookup_table("viridis"))
        self.cm_counts.set_counts(report.confusion)
        n = len(report.classes)
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
            item.setSizeHint(self.gallery_cell)
            self.gallery.addItem(item)

    def show_thumbnails(self, report, thumbnails: dict) -> None:
        """thumbnails: path -> small PIL image, made off the GUI thread (training_jobs.make_thumbnails); for
        `report` only (another shown since keeps its own)."""
        if report is not self.report:
            return
        for i in range(self.gallery.count()):
            item = self.gallery.item(i)
            thumb = thumbnails.get(item.data(Qt.UserRole))
            if thumb is not None:
                item.setIcon(QIcon(pil_to_pixmap(thumb)))

    def _on_item(self, item: QListWidgetItem) -> None:
        self.misclassified_clicked.emit(item.data(Qt.UserRole))
