"""The Folder tab's Map page: the folder's embedding map, what it is coloured by, its legend (below the plot, so it
never covers a dot) and the image under the pointer (its name, prediction and thumbnail), drawn from its model
(`vitstudio.app.pages.map.MapModel`). A drag of the box, a lasso and a click on a point go to the model."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from vitstudio.app.folder_scores import NAMES as SCORES
from vitstudio.app.pages.map import MapModel
from vitstudio.app.thumbnails import hover_job

from ... import workers
from ...common.bind import bind
from ..folder_map import FolderMapWidget, colour_groups, describe_image, head_groups
from ..score_colours import score_groups
from ..thumbnail_cache import THUMB


class MapPage(QWidget):
    page_id = "map"

    def __init__(self, model: MapModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
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
        self._follow(model)

    def _follow(self, model: MapModel) -> None:
        state = model.folder.state  # the colouring and the lasso switch are the Folder state's fields
        bind(self.colour_by, state, "colour_by")
        bind(self.lasso_button, state, "lasso")
        state.events.lasso.connect(self.map.set_lasso)
        self.map.describe = self._describe
        self.map.box_moved.connect(model.move_box)
        self.map.lasso_drawn.connect(model.select_lasso)
        self.map.picked.connect(model.pick)  # the current image, as a row of the table
        self.map.hovered.connect(model.point)
        model.changed.connect(self.draw)

    def draw(self, what: str) -> None:
        if what == "points":
            self._draw_points()
        elif what == "colours":
            self.map.set_groups(*self._colour_groups())
            if self.model.head is not None:  # short enough for the map's width at 1280×720
                self.map.setTitle(f"The quick head of {self.model.head.labelled} labels", size="9pt")
        elif what == "selection":
            self.map.show_selected(self.model.selected())
        elif what == "pointed":
            self._show_pointed()

    def _draw_points(self) -> None:
        model = self.model
        if model.coords is None:  # the earlier results' points, pointer and thumbnail go
            self._thumbnail.cancel()
            self.hover.clear()
            self.hover_image.clear()
            self.map.set_points(np.zeros((0, 2)), [], "pca")
            return
        groups, scale = self._colour_groups()
        self.map.set_points(model.coords, groups, model.method, scale=scale, box=model.folder.box)

    def _colour_groups(self) -> tuple[list, object]:
        """The map's colour groups and its colour bar (False: none, True: confidence's, or a score's scale)."""
        model, results = self.model, self.model.results
        if model.head is not None:
            return head_groups(model.head), False
        by = model.colour_key()
        if by in SCORES:  # the brain's scores
            return score_groups(model.folder.scores, by, len(results), len(results.labels))
        return colour_groups(results, by, model.tags), by == "confidence"

    def _describe(self, row: int) -> str:
        results = self.model.results
        return describe_image(results, row) if results is not None and row < len(results) else ""

    def _show_pointed(self) -> None:
        """The image under the pointer: its name and prediction at once, its thumbnail from a worker (the latest
        image pointed at wins)."""
        results, row = self.model.results, self.model.pointed
        if results is None or row is None:
            return
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


PAGE = MapPage
