"""A strip of thumbnails of the added images, each with its file name and predicted label; selecting one shows it
everywhere."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QListView, QListWidget, QListWidgetItem, QWidget

from ..imaging import pil_to_pixmap
from ..state import AppState, ImageEntry

THUMB = 96


def letterboxed(pixmap: QPixmap, side: int = THUMB) -> QPixmap:
    """The picture scaled to fit a side×side square, aspect ratio kept, centred on a transparent background
    (the icon box is square, so nothing is cropped and tall images do not spill over their neighbours)."""
    scaled = pixmap.scaled(side, side, Qt.KeepAspectRatio, Qt.SmoothTransformation)
    box = QPixmap(side, side)
    box.fill(Qt.transparent)
    painter = QPainter(box)
    painter.drawPixmap((side - scaled.width()) // 2, (side - scaled.height()) // 2, scaled)
    painter.end()
    return box


class ImageStripWidget(QListWidget):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.setViewMode(QListView.IconMode)
        self.setFlow(QListView.TopToBottom)
        self.setWrapping(False)
        self.setIconSize(QSize(THUMB, THUMB))
        self.setGridSize(QSize(THUMB + 30, THUMB + 46))  # room for two lines of text under each icon
        self.setWordWrap(True)
        self.setTextElideMode(Qt.ElideMiddle)
        self.setResizeMode(QListView.Adjust)
        self.setMovement(QListView.Static)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setMinimumWidth(THUMB + 52)
        self.setMaximumWidth(THUMB + 64)
        self._entries: list[ImageEntry] = []
        state.images_added.connect(self._on_images_added)
        state.image_selected.connect(self._on_image_selected)
        state.prediction_ready.connect(self._on_prediction_ready)
        state.model_loaded.connect(self._on_model_loaded)
        self.currentRowChanged.connect(self._on_row_changed)

    def _on_images_added(self, entries: list[ImageEntry]) -> None:
        for entry in entries:
            item = QListWidgetItem(self._caption(entry))
            item.setToolTip(entry.path if entry.error is None else f"{entry.path}\n{entry.error}")
            if entry.preview is not None:
                item.setIcon(QIcon(letterboxed(pil_to_pixmap(entry.preview))))
            else:
                blank = QPixmap(THUMB, THUMB)
                blank.fill(QColor("#b33"))
                item.setIcon(QIcon(blank))
                item.setForeground(QColor("#b33"))
            item.setTextAlignment(Qt.AlignHCenter | Qt.AlignTop)
            self.addItem(item)
            self._entries.append(entry)

    def _caption(self, entry: ImageEntry) -> str:
        name = Path(entry.path).name
        if entry.error is not None:
            return f"{name}\nunreadable"
        pred = self.state.prediction_for(entry)
        if pred is None or not pred.ok:
            return name
        mark = "⚠ " if pred.ood else ""  # unlike the model's training data (core/models/ood.py)
        return f"{name}\n{mark}{pred.labels[0]} · {pred.probs[0] * 100:.0f}%"

    def _on_prediction_ready(self, entry: ImageEntry) -> None:
        if entry in self._entries:
            self.item(self._entries.index(entry)).setText(self._caption(entry))

    def _on_model_loaded(self, _model) -> None:
        for row, entry in enumerate(self._entries):
            self.item(row).setText(self._caption(entry))

    def _on_row_changed(self, row: int) -> None:
        if 0 <= row < len(self._entries) and self._entries[row] is not self.state.selected:
            self.state.select(self._entries[row])

    def _on_image_selected(self, entry: ImageEntry | None) -> None:
        if entry in self._entries:
            self.setCurrentRow(self._entries.index(entry))

    def captions(self) -> list[str]:
        return [self.item(i).text() for i in range(self.count())]
