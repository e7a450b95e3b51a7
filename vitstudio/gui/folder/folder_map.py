"""The embedding map of a folder: one dot per image (pyqtgraph), coloured by given label, prediction, correctness
or confidence; hovering names the image, a box (drag its corners) selects the images inside it."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal

from vitstudio.core.folder.results import FolderResults

COLOUR_BY = ("prediction", "given label", "correct", "confidence")
EMPTY = "Open a folder: every image appears here, placed by its features"


def colour_groups(results: FolderResults, by: str) -> list[tuple[str, tuple[int, int, int], np.ndarray]]:
    """(name, RGB, image indices) per colour: a few groups, each drawn as one scatter item with one brush, so
    20k points cost a few draw calls and no per-point QBrush (that stalled the GUI thread for ~0.3 s)."""
    if by == "confidence":
        cmap = pg.colormap.get("viridis")
        bins = np.minimum((results.confidence * 10).astype(int), 9)
        return [(f"{b * 10}–{b * 10 + 10} %", tuple(int(c) for c in cmap.map((b + 0.5) / 10)[:3]),
                 np.nonzero(bins == b)[0]) for b in range(10) if (bins == b).any()]
    if by == "correct":
        correct = results.correct()
        palette = ((1, "correct", (60, 170, 80)), (0, "mistake", (220, 50, 50)),
                   (-1, "no given label", (150, 150, 150)))
        return [(name, rgb, np.nonzero(correct == v)[0]) for v, name, rgb in palette if (correct == v).any()]
    keys = np.asarray(results.labels)[results.predicted] if by == "prediction" else np.asarray(results.given)
    names = sorted(set(keys.tolist()))
    return [(n or "–", pg.intColor(i, hues=max(len(names), 1)).getRgb()[:3], np.nonzero(keys == n)[0])
            for i, n in enumerate(names)]


class FolderMapWidget(pg.PlotWidget):
    hovered = Signal(int)  # image index
    selection_changed = Signal(object)  # np.ndarray of image indices inside the box

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumSize(240, 200)
        self.items: list[pg.ScatterPlotItem] = []
        self.coords = np.zeros((0, 2), np.float32)
        self.legend = self.addLegend(offset=(5, 5), labelTextSize="8pt")
        self.box = pg.RectROI([0, 0], [1, 1], pen=pg.mkPen((255, 200, 0), width=2))
        self.box.setVisible(False)
        self.addItem(self.box)
        self.box.sigRegionChangeFinished.connect(self._on_box)
        self.setTitle(EMPTY, size="9pt")

    def set_points(self, coords: np.ndarray, groups: list, method: str) -> None:
        self.coords = np.asarray(coords, np.float32)
        self.set_groups(groups)
        if not len(self.coords):
            self.box.setVisible(False)
            self.setTitle(EMPTY, size="9pt")
            return
        self.setTitle(f"{len(self.coords)} images ({method.upper()}); drag the box to select", size="9pt")
        lo, hi = self.coords.min(0), self.coords.max(0)
        span = np.maximum(hi - lo, 1e-6)
        # placed without 'finished' signals: only the user's drags select
        self.box.setPos(lo + 0.25 * span, update=False, finish=False)
        self.box.setSize(0.5 * span, finish=False)
        self.box.setVisible(True)
        self.autoRange()

    def set_groups(self, groups: list) -> None:
        """One scatter item per colour group: (name, RGB, indices)."""
        for item in self.items:
            self.removeItem(item)
        self.legend.clear()
        self.items = []
        if not len(self.coords):
            return
        for name, rgb, idx in groups:
            item = pg.ScatterPlotItem(pos=self.coords[idx], data=idx, size=7, pen=None, brush=pg.mkBrush(*rgb),
                                      hoverable=True, name=str(name))
            item.sigHovered.connect(self._on_hover)
            self.addItem(item)
            self.items.append(item)

    def inside_box(self) -> np.ndarray:
        (x, y), (w, h) = self.box.pos(), self.box.size()
        c = self.coords
        return np.nonzero((c[:, 0] >= x) & (c[:, 0] <= x + w) & (c[:, 1] >= y) & (c[:, 1] <= y + h))[0]

    def _on_box(self, *_):
        self.selection_changed.emit(self.inside_box())

    def _on_hover(self, _item, points, _event):
        if len(points):
            self.hovered.emit(int(points[0].data()))
