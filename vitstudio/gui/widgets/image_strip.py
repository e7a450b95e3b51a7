"""A strip of thumbnails of the added images; selecting one shows it everywhere."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import QListView, QListWidget, QListWidgetItem, QWidget

from ..imaging import pil_to_pixmap
from ..state import AppState, ImageEntry

THUMB = 96


class ImageStripWidget(QListWidget):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.setViewMode(QListView.IconMode)
        self.setFlow(QListView.TopToBottom)
        self.setWrapping(False)
        self.setIconSize(QSize(THUMB, THUMB))
        self.setResizeMode(QListView.Adjust)
        self.setMovement(QListView.Static)
        self.setMinimumWidth(THUMB + 40)
        self.setMaximumWidth(THUMB + 60)
        self._entries: list[ImageEntry] = []
        state.images_added.connect(self._on_images_added)
        state.image_selected.connect(self._on_image_selected)
        self.currentRowChanged.connect(self._on_row_changed)

    def _on_images_added(self, entries: list[ImageEntry]) -> None:
        for entry in entries:
            item = QListWidgetItem(entry.path.rsplit("/", 1)[-1])
            item.setToolTip(entry.path if entry.error is None else f"{entry.path}\n{entry.error}")
            if entry.preview is not None:
                item.setIcon(QIcon(pil_to_pixmap(entry.preview).scaled(THUMB, THUMB, Qt.KeepAspectRatio,
                                                                       Qt.SmoothTransformation)))
            else:
                blank = QPixmap(THUMB, THUMB)
                blank.fill(QColor("#b33"))
                item.setIcon(QIcon(blank))
                item.setForeground(QColor("#b33"))
            item.setTextAlignment(Qt.AlignHCenter)
            self.addItem(item)
            self._entries.append(entry)

    def _on_row_changed(self, row: int) -> None:
        if 0 <= row < len(self._entries) and self._entries[row] is not self.state.selected:
            self.state.select(self._entries[row])

    def _on_image_selected(self, entry: ImageEntry | None) -> None:
        if entry in self._entries:
            self.setCurrentRow(self._entries.index(entry))
