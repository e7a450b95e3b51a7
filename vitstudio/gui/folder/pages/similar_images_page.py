"""The Similar images page: the folder's current image (bigger, on its own row) above the grid of its nearest
neighbours, drawn from its model (`vitstudio.app.pages.similar_images.SimilarImagesModel`); a double-click asks for the
image to be explained (the Folder tab forwards `explain_requested` to the Attention tab)."""

from __future__ import annotations

import html
import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListWidgetItem, QVBoxLayout, QWidget

from vitstudio.app.pages.similar_images import SimilarImagesModel
from vitstudio.app.thumbnails import thumbnail_job

from ... import workers
from ..folder_map import describe_image
from ..folder_review import QUERY_ICON, array_pixmap, icon_list, item_path, letterboxed, load_icons

EMPTY = "Select a row of the table: its most similar images appear here."


class SimilarImagesPage(QWidget):
    page_id = "similar"
    explain_requested = Signal(str)  # a path to explain in the Attention tab

    def __init__(self, model: SimilarImagesModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.query_image = QLabel()
        self.query_image.setFixedSize(QUERY_ICON, QUERY_ICON)
        self.query_image.setAlignment(Qt.AlignCenter)
        self.query_text = QLabel(EMPTY)
        self.query_text.setWordWrap(True)
        self.list = icon_list()
        self._query_thumb = workers.KeyedSlot(workers.LONG)
        self._thumbs = workers.KeyedSlot(workers.LONG)
        top = QHBoxLayout()
        top.addWidget(self.query_image)
        top.addWidget(self.query_text, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.list, 1)
        self.list.itemDoubleClicked.connect(self._explain)
        model.changed.connect(self.draw)

    def draw(self, what: str) -> None:
        if what == "query":
            self._show_query()
        self.list.clear()
        for path, sim in self.model.found:
            item = QListWidgetItem(f"{sim:.3f}\n{os.path.basename(path)}")
            item.setData(Qt.UserRole, path)
            item.setToolTip(f"{path}\ncosine similarity {sim:.4f}; double-click to explain it")
            self.list.addItem(item)
        if self.model.found:
            load_icons(self._thumbs, self.list, [p for p, _ in self.model.found])

    def _show_query(self) -> None:
        path = self.model.query_path
        self.query_image.clear()
        if path is None:
            self.query_text.setText(EMPTY)
            self.query_text.setToolTip("")
            return
        caption = describe_image(self.model.folder.results, self.model.query).split("\n", 1)[1]
        lines = "<br>".join(html.escape(line) for line in caption.splitlines())
        self.query_text.setText(f"<b>{html.escape(os.path.basename(path))}</b><br>{lines}<br>Most similar below "
                                "(cosine similarity of the model's features); double-click one to explain it.")
        self.query_text.setToolTip(path)
        self._query_thumb.start((path, QUERY_ICON), "Thumbnail", thumbnail_job, [path], QUERY_ICON,
                                on_yield=self._on_query_thumb)

    def _on_query_thumb(self, found) -> None:
        path, array = found
        if array is not None and path == self.model.query_path:
            self.query_image.setPixmap(letterboxed(array_pixmap(array), QUERY_ICON))

    def _explain(self, item: QListWidgetItem) -> None:
        self.explain_requested.emit(item_path(item))


PAGE = SimilarImagesPage
