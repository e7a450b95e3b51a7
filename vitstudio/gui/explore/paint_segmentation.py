"""The Paint page's segmentation over the Attention tab's image: a toggle bound to the overlay's `shown`,
the classes in the Paint page's colours over the crop the map is drawn on, and a line with each class's share. The
model is `app.paint_overlay.PaintOverlay`, attached by the window's routes (the Paint page lives in the Folder tab)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QLabel, QVBoxLayout, QWidget

from ..common.bind import bind
from ..common.class_colours import overlay

NOT_ATTACHED = "Paint a few masks on the Folder tab's Paint page: the image here is then segmented from them."


class PaintSegmentationWidget(QWidget):
    def __init__(self, map_view, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.toggle = QCheckBox("Paint segmentation")
        self.toggle.setEnabled(False)
        self.toggle.setToolTip(NOT_ATTACHED)
        self.line = QLabel()
        self.line.setWordWrap(True)
        self.item = pg.ImageItem(axisOrder="row-major")
        self.item.setZValue(15)  # over the map, under the patch marker
        map_view.view.addItem(self.item)
        self.model = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.toggle)
        layout.addWidget(self.line)

    def attach(self, model) -> None:
        """`model`: an app.paint_overlay.PaintOverlay."""
        self.model = model
        bind(self.toggle, model.state, "shown")
        self.toggle.setEnabled(True)
        self.toggle.setToolTip("Segment this image from the masks painted on the Folder tab's Paint page (the "
                               "classes in its colours; painting there segments this image again)")
        model.changed.connect(self.draw)
        self.draw()

    def draw(self) -> None:
        model = self.model
        result = model.result if model is not None and model.state.shown else None
        self.line.setText(model.line() if model is not None else "")
        if result is None:
            self.item.clear()
            return
        labels = result[1]  # (h, w) of the crop, at the model's input size
        self.item.setImage(overlay(None, labels, labels.shape), levels=(0, 255))
