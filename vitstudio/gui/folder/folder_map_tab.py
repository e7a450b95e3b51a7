"""The Folder tab's Map page: the folder's embedding map, what it is coloured by, its legend (below the plot, so it
never covers a dot) and the image under the pointer (its name, prediction and thumbnail)."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from vitstudio.app.thumbnails import hover_job

from .. import workers
from .folder_map import FolderMapWidget, describe_image
from .thumbnail_cache import THUMB


class FolderMapTabWidget(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.map = FolderMapWidget()
        self._thumbnail = workers.KeyedSlot()
        self.colour_by = QComboBox()  # its items: the colour_by field's choices (bind)
        self.colour_by.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)  # not as wide as
        self.colour_by.setMinimumContentsLength(8)  # "representativeness": the map keeps the room
        self.lasso_button = QPushButton("Lasso", checkable=True)  # bound to the Folder state's `lasso`
        self.lasso_button.setToolTip("On: a drag on the map draws round the images to select (the table and gallery "
                                     "follow). Off: a drag pans the map.")
        self.hover = QLabel()
        # a long file name under the pointer is cut, not allowed to widen the pane (and the splitter) for good
        self.hover.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.hover.setMinimumWidth(0)
        self.hover_image = QLabel()
        self.hover_image.setFixedSize(72, 72)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)  # the side's page: its frame is margin enough, the map keeps the room
        row = QHBoxLayout()
        row.addWidget(QLabel("Colour by"))
        row.addWidget(self.colour_by)
        row.addWidget(self.lasso_button)
        row.addWidget(self.hover, 1)
        row.addWidget(self.hover_image)
        box.addLayout(row)
        box.addWidget(self.map, 1)
        box.addWidget(self.map.legend)

    def show_pointed(self, results, row: int) -> None:
        """The image under the pointer: its name and prediction at once, its thumbnail from a worker (the latest
        image hovered wins)."""
        if results is not None and row < len(results):
            self.show_hover(describe_image(results, row).replace("\n", " · "))
            self._thumbnail.start(results.paths[row], "Thumbnail", hover_job, results.paths[row], THUMB,
                                  on_result=self._on_thumbnail)

    def _on_thumbnail(self, found) -> None:
        self.show_thumbnail(found[0][1])

    def show_hover(self, text: str) -> None:
        self.hover.setText(text)
        self.hover.setToolTip(text)

    def show_thumbnail(self, array: np.ndarray | None) -> None:
        """An (H, W, 3) uint8 thumbnail of the image under the pointer; None clears it (unreadable)."""
        if array is None:
            self.hover_image.clear()
            return
        h, w, _ = array.shape
        self.hover_image.setPixmap(QPixmap.fromImage(QImage(array.tobytes(), w, h, 3 * w, QImage.Format_RGB888)))

    def clear(self) -> None:
        self._thumbnail.cancel()  # a thumbnail on its way is of results that are gone
        self.hover.clear()
        self.hover_image.clear()
        self.map.set_points(np.zeros((0, 2)), [], "pca")

