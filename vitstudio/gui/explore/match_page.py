"""Compare → Match: image A (the strip's selected image) beside image B (another of the strip, or a file);
a click on A maps its patch's similarity over B and marks the best match; the mutual nearest neighbours are drawn
on both as pairs of the same colour. The page draws `app.match_view.MatchModel`; block, facet, how many matches and
the map's opacity over B are its state's fields, bound."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from .. import file_dialogs
from ..common.bind import bind
from ..common.map_view import MapView
from ..common.type_map import control_for

IMAGES = "Images (*.jpg *.jpeg *.png *.bmp *.gif *.webp *.tif *.tiff);;All files (*)"
PAIR_COLOURS = ("#ff5252", "#ffd740", "#69f0ae", "#40c4ff", "#e040fb", "#ff6e40", "#b2ff59", "#18ffff", "#ff4081",
                "#ffffff")
POINT_COLOUR = "#00e5ff"


def _dots() -> pg.ScatterPlotItem:
    dots = pg.ScatterPlotItem(pxMode=True)
    dots.setZValue(30)
    return dots


class MatchPage(QWidget):
    def __init__(self, panel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.model = panel.app.match  # the App's: it follows the model loaded and the selected image itself
        fields = self.model.state.fields()
        self.block, self.facet, self.top = (control_for(fields[name]) for name in ("block", "facet", "top"))
        self.refine = control_for(fields["refine"], title="Sub-patch")
        self.opacity = control_for(fields["opacity"], widget="slider")  # as the Attention tab's
        self.opacity.setMaximumWidth(120)
        self.other = QComboBox()
        self.other.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.other.setMinimumContentsLength(14)
        self.other.setToolTip("Image B: another image of the strip, or a file opened with Open…")
        self.open_button = QPushButton("Open…")
        row = QHBoxLayout()
        for label, widget in (("Image B", self.other), (None, self.open_button), ("Block", self.block),
                              ("Facet", self.facet), ("Matches", self.top), (None, self.refine),
                              ("Opacity", self.opacity)):
            if label:
                row.addWidget(QLabel(label))
            row.addWidget(widget)
        row.addStretch(1)
        self.titles = [QLabel("A"), QLabel("B")]
        self.views = [MapView(), MapView()]
        self.dots = [_dots(), _dots()]
        grid = QGridLayout()
        for i in range(2):
            self.titles[i].setAlignment(Qt.AlignCenter)
            for widget in (self.titles[i], self.views[i]):
                widget.setSizePolicy(QSizePolicy.Ignored, widget.sizePolicy().verticalPolicy())
            self.views[i].view.addItem(self.dots[i])
            grid.addWidget(self.titles[i], 0, i)
            grid.addWidget(self.views[i], 1, i)
            grid.setColumnStretch(i, 1)
        self.line = QLabel()
        self.line.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(grid, 1)
        layout.addWidget(self.line)
        for widget, name in ((self.block, "block"), (self.facet, "facet"), (self.top, "top"),
                             (self.refine, "refine"), (self.opacity, "opacity")):
            bind(widget, self.model.state, name)
        self.other.activated.connect(self._on_other_picked)
        self.open_button.clicked.connect(self.open_b)
        self.views[0].scene().sigMouseClicked.connect(self._on_click_a)
        self.model.changed.connect(self._draw)
        self.model.state.events.other.connect(self._show_other)
        panel.state.images_added.connect(self._add_to_strip)
        panel.state.images_removed.connect(self._fill_strip)
        self._fill_strip()
        self._draw()

    # -- image B -----------------------------------------------------------------------------------------------
    def _fill_strip(self, _entries=None) -> None:
        """B's list: the strip's readable images, and the file opened last if it is not one of them."""
        paths = [e.path for e in self.panel.state.images if e.error is None and e.path]
        chosen = self.model.state.other
        self.other.clear()
        for path in paths + ([chosen] if chosen and chosen not in paths else []):
            self.other.addItem(Path(path).name, path)
        self._show_other(chosen)

    def _add_to_strip(self, entries) -> None:
        """New images of the strip join B's list (appended: refilling the list per open was quadratic)."""
        chosen = self.model.state.other
        for entry in entries:
            if entry.error is None and entry.path and entry.path != chosen:
                self.other.addItem(Path(entry.path).name, entry.path)

    def _show_other(self, path: str | None) -> None:
        index = self.other.findData(path) if path else -1
        if path and index < 0:
            self.other.addItem(Path(path).name, path)
            index = self.other.count() - 1
        self.other.setCurrentIndex(index)

    def _on_other_picked(self, index: int) -> None:
        self.model.set_b(self.other.itemData(index))

    def open_b(self) -> None:
        path = file_dialogs.open_file(self, "Image B", IMAGES)
        if path:
            self.model.set_b(path)

    def _on_click_a(self, event) -> None:
        """The point clicked on A, in the crop's pixels (not only its patch: a point between patches is kept)."""
        view, features = self.views[0].view, self.model.features
        if features is None or not view.sceneBoundingRect().contains(event.scenePos()):
            return
        point = view.mapSceneToView(event.scenePos())
        (h, w) = features.crops[0].shape[:2]
        if 0 <= point.x() < w and 0 <= point.y() < h:
            self.model.click_crop(point.x(), point.y())

    # -- on screen only ----------------------------------------------------------------------------------------
    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.model.active = True
        self.model.refresh()

    def hideEvent(self, event) -> None:
        super().hideEvent(event)
        self.model.active = False

    # -- drawing -----------------------------------------------------------------------------------------------
    def _draw(self) -> None:
        model, features, match = self.model, self.model.features, self.model.match
        self.line.setText(model.line())
        for title, text in zip(self.titles, model.titles()):
            title.setText(text)
        if features is None:
            for view, dots in zip(self.views, self.dots):
                view.set_image(None)
                view.set_map(None)
                dots.clear()
            return
        for view, crop in zip(self.views, features.crops):
            view.set_image(crop)
        a, b = features.placed
        self.views[1].set_map(None if match is None else match.similarity, "inferno", model.state.opacity / 100)
        self.views[1].set_marker(None if match is None else match.best_patch)
        spots: list[list[dict]] = [[], []]
        for i, pair in enumerate(model.mutual()):
            colour = PAIR_COLOURS[i % len(PAIR_COLOURS)]
            for side, placed, key in ((0, a, "a"), (1, b, "b")):
                u, v = placed.to_crop(*pair[key])
                spots[side].append(dict(pos=(u, v), size=8, brush=pg.mkBrush(colour), pen=pg.mkPen("k")))
        if match is not None:
            for side, placed, (x, y) in ((0, a, model.state.point), (1, b, match.best)):
                u, v = placed.to_crop(x, y)
                spots[side].append(dict(pos=(u, v), size=14, symbol="+", brush=pg.mkBrush(POINT_COLOUR),
                                        pen=pg.mkPen(POINT_COLOUR, width=2)))
        for dots, side in zip(self.dots, spots):
            dots.setData(side)
