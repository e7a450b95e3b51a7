"""A strip of thumbnails of the added images, each with its file name and predicted label; selecting one shows it
everywhere. Up/Down walk through it; Delete (or the context menu) takes the selected images out of it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QItemSelectionModel, QSize, Qt
from PySide6.QtGui import QAction, QColor, QIcon, QKeySequence, QPainter, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QListView, QListWidget, QListWidgetItem, QWidget

from vitstudio.app.app_state import AppState, ImageEntry

from ..imaging import pil_to_pixmap

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
        self.setSelectionMode(QAbstractItemView.ExtendedSelection)  # Shift/Ctrl-click several, then Delete
        self._entries: list[ImageEntry] = []
        self._row_of: dict[int, int] = {}  # id(entry) -> its row: a lookup per prediction, not a scan of the strip
        self._build_actions()
        state.images_added.connect(self._on_images_added)
        state.images_removed.connect(self._on_images_removed)
        state.image_selected.connect(self._on_image_selected)
        state.prediction_ready.connect(self._on_prediction_ready)
        state.model_loaded.connect(self._on_model_loaded)
        self._removing = False
        self.currentRowChanged.connect(self._on_row_changed)

    def _build_actions(self) -> None:
        """The strip's own actions: its context menu, and shortcuts that act only while it has the focus (Delete
        in a text field elsewhere must not take an image out)."""
        self.remove_action = QAction("Remove from strip", self)
        self.remove_action.setShortcut(QKeySequence.Delete)
        self.remove_action.setShortcutContext(Qt.WidgetWithChildrenShortcut)
        self.remove_action.triggered.connect(self.remove_selected)
        self.remove_unreadable_action = QAction("Remove unreadable images", self)
        self.remove_unreadable_action.triggered.connect(self.remove_unreadable)
        self.clear_action = QAction("Remove all images", self)
        self.clear_action.triggered.connect(lambda: self.state.remove_images(list(self._entries)))
        for action in (self.remove_action, self.remove_unreadable_action, self.clear_action):
            self.addAction(action)
        self.setContextMenuPolicy(Qt.ActionsContextMenu)

    def selected_entries(self) -> list[ImageEntry]:
        return [self._entries[i.row()] for i in self.selectedIndexes() if i.row() < len(self._entries)]

    def remove_selected(self) -> None:
        chosen = self.selected_entries()
        if not chosen and 0 <= self.currentRow() < len(self._entries):
            chosen = [self._entries[self.currentRow()]]
        self.state.remove_images(chosen)

    def remove_unreadable(self) -> None:
        self.state.remove_images([e for e in self._entries if e.error is not None])

    def _on_images_removed(self, entries: list[ImageEntry]) -> None:
        gone = {id(e) for e in entries}
        self._removing = True  # rows shifting under the cursor are not the user's choice of image
        try:
            for row in reversed(range(len(self._entries))):
                if id(self._entries[row]) in gone:
                    del self._entries[row]
                    self.takeItem(row)
            self._row_of = {id(e): row for row, e in enumerate(self._entries)}
            if id(self.state.selected) in self._row_of:
                self.setCurrentRow(self._row_of[id(self.state.selected)], QItemSelectionModel.ClearAndSelect)
        finally:
            self._removing = False

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
            self._row_of[id(entry)] = len(self._entries)
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

    def _on_prediction_ready(self, entries: list[ImageEntry]) -> None:
        for entry in entries:
            row = self._row_of.get(id(entry))
            if row is not None:
                self.item(row).setText(self._caption(entry))

    def _on_model_loaded(self, _model) -> None:
        for row, entry in enumerate(self._entries):
            self.item(row).setText(self._caption(entry))

    def _on_row_changed(self, row: int) -> None:
        if not self._removing and 0 <= row < len(self._entries) and self._entries[row] is not self.state.selected:
            self.state.select(self._entries[row])

    def _on_image_selected(self, entry: ImageEntry | None) -> None:
        row = self._row_of.get(id(entry))
        if row is not None:  # the image shown is the one selection (Delete must not take an earlier one)
            self.setCurrentRow(row, QItemSelectionModel.ClearAndSelect)

    def captions(self) -> list[str]:
        return [self.item(i).text() for i in range(self.count())]
