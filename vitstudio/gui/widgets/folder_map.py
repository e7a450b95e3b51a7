"""The embedding map of a folder: one dot per image (pyqtgraph), coloured by given label, prediction, correctness
or confidence; hovering names the image, a box (drag its corners) selects the images inside it."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal

from vitstudio.core.folder.results import FolderResults

COLOUR_BY = ("prediction", "given label", "correct", "confidence")


def colours(results: FolderResults, by: str) -> list:
    """One QBrush per image."""
    if by == "confidence":
        cmap = pg.colormap.get("viridis")
        return [pg.mkBrush(cmap.map(float(c), mode="qcolor")) for c in results.confidence]
    if by == "correct":
        palette = {1: (60, 170, 80), 0: (220, 50, 50), -1: (150, 150, 150)}
        return [pg.mkBrush(*palette[int(c)]) for c in results.correct()]
    keys = [results.predicted_label(i) for i in range(len(results))] if by == "prediction" else list(results.given)
    names = sorted(set(keys))
    brushes = {n: pg.mkBrush(pg.intColor(i, hues=max(len(names), 1))) for i, n in enumerate(names)}
    return [brushes[k] for k in keys]


class FolderMapWidget(pg.PlotWidget):
    hovered = Signal(int)  # image index
    selection_changed = Signal(object)  # np.ndarray of image indices inside the box

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumSize(240, 200)
        self.scatter = pg.ScatterPlotItem(size=7, pen=None, hoverable=True)
        self.addItem(self.scatter)
        self.coords = np.zeros((0, 2), np.float32)
        self.box = pg.RectROI([0, 0], [1, 1], pen=pg.mkPen((255, 200, 0), width=2))
        self.box.setVisible(False)
        self.addItem(self.box)
        self.box.sigRegionChangeFinished.connect(self._on_box)
        self.scatter.sigHovered.connect(self._on_hover)

    def set_points(self, coords: np.ndarray, brushes: list, method: str) -> None:
        self.coords = np.asarray(coords, np.float32)
        self.scatter.setData(pos=self.coords, brush=brushes, data=np.arange(len(self.coords)))
        self.setTitle(f"{len(self.coords)} images ({method.upper()}); drag the box to select", size="9pt")
        if len(self.coords):
            lo, hi = self.coords.min(0), self.coords.max(0)
            span = np.maximum(hi - lo, 1e-6)
            # placed without 'finished' signals: only the user's drags select
            self.box.setPos(lo + 0.25 * span, update=False, finish=False)
            self.box.setSize(0.5 * span, finish=False)
            self.box.setVisible(True)
        self.autoRange()

    def set_brushes(self, brushes: list) -> None:
        if len(brushes) == len(self.coords):
            self.scatter.setBrush(brushes)

    def inside_box(self) -> np.ndarray:
        (x, y), (w, h) = self.box.pos(), self.box.size()
        c = self.coords
        return np.nonzero((c[:, 0] >= x) & (c[:, 0] <= x + w) & (c[:, 1] >= y) & (c[:, 1] <= y + h))[0]

    def _on_box(self, *_):
        self.selection_changed.emit(self.inside_box())

    def _on_hover(self, _item, points, _event):
        if len(points):
            self.hovered.emit(int(points[0].data()))
