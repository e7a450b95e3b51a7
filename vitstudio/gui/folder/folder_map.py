"""The embedding map of a folder: one dot per image (pyqtgraph), coloured by given label, prediction, correctness
or confidence; hovering names the image in a tooltip, a box (drag its corners) or a lasso (map_lasso.py) selects
the images inside it. Categories are named in a legend beside the plot (never over the dots), with how many of each
the selection holds; confidence gets a colour bar."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QSizePolicy

from vitstudio.app.map_selection import counts_inside

from .map_density import DENSE_ABOVE, DensityLayer
from .map_lasso import LassoViewBox

EMPTY = "Open a folder: every image appears here, placed by its features"
CONFIDENCE_MAP = "viridis"
CONFIDENCE_SCALE = ("confidence %", 0.0, 100.0)  # the colour bar's label and range (a score's: score_colours.py)
UNSURE = 0.7  # below this probability the quick head's dot is drawn pale


def colour_groups(results, by: str, tags: list[set[str]] | None = None
                  ) -> list[tuple[str, tuple[int, int, int], np.ndarray]]:
    """(name, RGB, image indices) per colour: a few groups, each drawn as one scatter item with one brush, so
    20k points cost a few draw calls and no per-point QBrush (that stalled the GUI thread for ~0.3 s). By tag: a
    group per tag name (an image with two tags is in both), then the untagged ones; `results`: a FolderResults;
    `tags`: per row (FolderTags)."""
    if by == "tag":
        return tag_groups(tags or [set()] * len(results))
    if by == "confidence":
        cmap = pg.colormap.get(CONFIDENCE_MAP)
        bins = np.minimum((results.confidence * 10).astype(int), 9)
        return [(f"{b * 10}–{b * 10 + 10} %", tuple(int(c) for c in cmap.map((b + 0.5) / 10)[:3]),
                 np.nonzero(bins == b)[0]) for b in range(10) if (bins == b).any()]
    if by == "correct":
        correct = results.correct()
        palette = ((1, "correct", (60, 170, 80)), (0, "mistake", (220, 50, 50)),
                   (-1, "folder not a model class" if any(results.given) else "no given label",
                    (150, 150, 150)))
        return [(name, rgb, np.nonzero(correct == v)[0]) for v, name, rgb in palette if (correct == v).any()]
    keys = np.asarray(results.labels)[results.predicted] if by == "prediction" else np.asarray(results.given)
    colours = class_colours(list(results.labels) + sorted(set(results.given) - set(results.labels)))
    return [(n or "–", colours[n], np.nonzero(keys == n)[0]) for n in sorted(set(keys.tolist()))]


def head_groups(head) -> list[tuple[str, tuple[int, int, int], np.ndarray]]:
    """The quick head's predictions (a LabelHead) as colour groups: a hue per class, pale where it is under UNSURE
    sure; the classes' groups that hold no image are left out."""
    groups = []
    for i, name in enumerate(head.classes):
        hue = pg.intColor(i, hues=max(len(head.classes), 1)).getRgb()[:3]
        pale = tuple(int(c + (255 - c) * 0.6) for c in hue)
        ours = head.predicted == i
        groups += [(name, hue, np.flatnonzero(ours & (head.confidence >= UNSURE))),
                   (f"{name}, unsure", pale, np.flatnonzero(ours & (head.confidence < UNSURE)))]
    return [g for g in groups if len(g[2])]


def tag_groups(tags: list[set[str]]) -> list[tuple[str, tuple[int, int, int], np.ndarray]]:
    names = sorted(set().union(*tags)) if tags else []
    colours = class_colours(names)
    groups = [(name, colours[name], np.array([i for i, t in enumerate(tags) if name in t], np.int64))
              for name in names]
    untagged = np.array([i for i, t in enumerate(tags) if not t], np.int64)
    return groups + ([("untagged", (150, 150, 150), untagged)] if len(untagged) else [])


def class_colours(names: list[str]) -> dict[str, tuple[int, int, int]]:
    """One colour per name, the same whichever view (prediction or given label) and whichever classes occur: hues
    spread over all of them (before, over the names present, so class 'blue' was red in one view and another
    colour in the next). Names that are all distinct colour words (blue, green, red) are drawn in those colours."""
    named = [QColor.fromString(n) for n in names if n]
    rgbs = {c.getRgb()[:3] for c in named if c.isValid()}
    # opaque ones only ("transparent" is a colour word too), and distinct (two names for one colour: hues)
    if named and all(c.isValid() and c.alpha() == 255 for c in named) and len(rgbs) == len(named):
        return {n: QColor.fromString(n).getRgb()[:3] if n else (150, 150, 150) for n in names}
    return {n: pg.intColor(i, hues=max(len(names), 1)).getRgb()[:3] for i, n in enumerate(names)}


def describe_image(results, row: int) -> str:
    """The tooltip of a dot (`results`: a FolderResults): file name, given label, prediction and confidence
    (words, not pyqtgraph's data=)."""
    given, predicted = results.given[row], results.predicted_label(row)
    mark = "" if given not in results.labels else (" ✓" if given == predicted else " ✗")
    return (f"{os.path.basename(results.paths[row])}\ngiven: {given or 'none (loose file)'}\n"
            f"predicted: {predicted} ({results.confidence[row]:.0%}){mark}")


class FolderMapWidget(pg.PlotWidget):
    hovered = Signal(int)  # image index
    picked = Signal(int)  # a point clicked: that image becomes the current one (the app's selection)
    box_moved = Signal(float, float, float, float)  # the user's drag: x, y, width, height (the model selects)
    lasso_drawn = Signal(object)  # the outline drawn, (M, 2) in the map's coordinates (the model selects)

    def __init__(self, parent=None) -> None:
        self.lasso = LassoViewBox()
        super().__init__(parent, viewBox=self.lasso)
        self.lasso.lasso_drawn.connect(self.lasso_drawn)
        self.groups: list = []  # what the legend names: (name, RGB, rows) per colour
        self.selected: np.ndarray | None = None  # the rows selected on the map, counted in the legend
        self.setMinimumSize(240, 200)
        self.items: list[pg.ScatterPlotItem] = []  # up to DENSE_ABOVE points: a scatter item per colour
        self.density = DensityLayer(self.lasso)  # more: one raster (map_density.py)
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)  # hovering the raster names the point under it
        self.scene().sigMouseClicked.connect(self._on_raster_click)  # a click on the raster picks the point under it
        self.coords = np.zeros((0, 2), np.float32)
        self.describe: Callable[[int], str] | None = None  # row -> tooltip text, set by the panel
        self.legend = QLabel()  # a widget beside the plot (placed by the map tab): it never covers a dot
        self.legend.setWordWrap(True)
        self.legend.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.colour_bar = pg.ColorBarItem(values=(0, 100), colorMap=pg.colormap.get(CONFIDENCE_MAP),
                                          interactive=False, width=14, label="confidence %")
        self.getPlotItem().layout.addItem(self.colour_bar, 2, 5)  # right of the plot (columns 0-2: axes, view)
        self.colour_bar.setVisible(False)  # placed once: see _show_colour_bar
        self.box = pg.RectROI([0, 0], [1, 1], pen=pg.mkPen((255, 200, 0), width=2))
        self.box.setVisible(False)
        self.addItem(self.box)
        self.box.sigRegionChangeFinished.connect(self._on_box)
        self.setTitle(EMPTY, size="9pt")

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        """Small: pyqtgraph asks for 640×480, which made the Folder tab taller than a 720-px screen (its page is
        sized by height-for-width, from what its parts ask for); the map grows into whatever room there is."""
        return QSize(300, 200)

    def set_points(self, coords: np.ndarray, groups: list, method: str, scale: bool = False,
                   box: tuple | None = None) -> None:
        """The points, coloured by `groups`, and the box where the Folder model placed it (x, y, width, height)."""
        self.coords = np.asarray(coords, np.float32)
        self.selected = None  # a selection on another map selects nothing here
        self.lasso.clear_outline()
        self.set_groups(groups, scale)
        if not len(self.coords):
            self.box.setVisible(False)
            self.setTitle(EMPTY, size="9pt")
            return
        self.setTitle(f"{len(self.coords)} images ({method.upper()}); drag the box, or draw with Lasso, to select",
                      size="9pt")
        if box is not None:  # placed without 'finished' signals: only the user's drags select
            self.box.setPos(box[:2], update=False, finish=False)
            self.box.setSize(box[2:], finish=False)
        self.box.setVisible(box is not None and not self.lasso.lasso_on)
        self.autoRange()

    def set_groups(self, groups: list, scale: bool = False) -> None:
        """One scatter item per colour group: (name, RGB, indices). `scale`: the groups are bins of a continuous
        value, named by the colour bar instead of the legend: True for confidence, else (label, low, high)."""
        for item in self.items:
            self.removeItem(item)
        self.items = []
        self._show_colour_bar(scale if len(self.coords) else False)
        self.groups = [] if scale else list(groups)
        self._write_legend()
        if len(self.coords) > DENSE_ABOVE:  # the raster stays up until drawn again: no blank frame between
            self.density.show(self.coords, list(groups))
            return
        self.density.hide()
        if not len(self.coords):
            return
        for name, rgb, idx in groups:
            item = pg.ScatterPlotItem(pos=self.coords[idx], data=idx, size=7, pen=None, brush=pg.mkBrush(*rgb),
                                      hoverable=True, name=str(name), tip=self._tip)
            item.sigHovered.connect(self._on_hover)
            item.sigClicked.connect(self._on_point_clicked)
            self.addItem(item)
            self.items.append(item)

    def drawn(self) -> bool:
        """The points are on the map (as scatter items, or as the raster once it is drawn)."""
        return bool(self.items) or (self.density.shown and self.density.image.image is not None)

    def set_lasso(self, on: bool) -> None:
        """The lasso or the box: one tool on the map at a time (the box hidden while the lasso draws)."""
        self.lasso.set_lasso(on)
        self.box.setVisible(not on and bool(len(self.coords)))
        if not on:
            self.lasso.clear_outline()

    def show_selected(self, rows: np.ndarray | None) -> None:
        """The rows selected on the map (None: none); the legend counts them per colour. No rows: the outline goes."""
        self.selected = None if rows is None else np.asarray(rows)
        if rows is None:
            self.lasso.clear_outline()
        self._write_legend()

    def _write_legend(self) -> None:
        """Each colour's name and count: "7 (12 of 40)" while a selection holds 12 of its 40 images."""
        if not len(self.coords) or not self.groups:
            self.legend.setText("")
            return
        inside = counts_inside([idx for _n, _rgb, idx in self.groups], self.selected)
        self.legend.setText("   ".join(
            f"<span style='color: rgb{tuple(rgb)}'>●</span>&nbsp;{name} "
            f"({len(idx) if self.selected is None else f'{k} of {len(idx)}'})"
            for (name, rgb, idx), k in zip(self.groups, inside)))

    def _show_colour_bar(self, shown: bool) -> None:
        """Hidden, the layout gives the plot its width back. Not taken out of the layout: every move in or out of
        the scene reconnected pyqtgraph's view signals to the bar's button, and PySide6 kept a weak reference per
        connection for the window's lifetime."""
        self.colour_bar.setVisible(bool(shown))
        if shown:  # the axis measures its label's room only while the label is visible: measure it again now
            label, low, high = CONFIDENCE_SCALE if shown is True else shown
            self.colour_bar.setLevels(values=(low, high))
            self.colour_bar.setLabel("left", label)
            self.colour_bar.getAxis("left").showLabel()

    def _tip(self, x: float, y: float, data) -> str:
        return self.describe(int(data)) if self.describe is not None else ""

    def _on_box(self, *_):
        self.lasso.clear_outline()  # the box selects now
        (x, y), (w, h) = self.box.pos(), self.box.size()
        self.box_moved.emit(float(x), float(y), float(w), float(h))

    def _on_mouse_moved(self, scene_pos) -> None:
        if not self.density.shown:
            return  # the scatter items hover by themselves
        point = self.lasso.mapSceneToView(scene_pos)
        row = self.density.nearest(point.x(), point.y())
        self.setToolTip(self.describe(row) if row is not None and self.describe is not None else "")
        if row is not None:
            self.hovered.emit(row)

    def _on_point_clicked(self, _item, points, _event) -> None:
        if len(points):
            self.picked.emit(int(points[0].data()))

    def _on_raster_click(self, event) -> None:
        if not self.density.shown or event.isAccepted():
            return
        point = self.lasso.mapSceneToView(event.scenePos())
        row = self.density.nearest(point.x(), point.y())
        if row is not None:
            self.picked.emit(row)

    def _on_hover(self, _item, points, _event):
        if len(points):
            self.hovered.emit(int(points[0].data()))
