"""The map's view box with a lasso: while the lasso is on, a left-button drag draws a free-form outline instead of
panning, and its release hands the outline (in the map's coordinates) to whoever selects by it (the Folder model,
`select_lasso`). The outline stays drawn until another selection replaces it."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal

LASSO_PEN = (255, 200, 0)  # the box's colour: one colour for what selects on the map
MIN_STEP_PX = 3  # a vertex per few pixels of drag: an outline of hundreds of vertices, not thousands


class LassoViewBox(pg.ViewBox):
    lasso_drawn = Signal(object)  # (M, 2) float array: the outline's vertices in the map's coordinates

    def __init__(self) -> None:
        super().__init__()
        self.lasso_on = False
        self.outline = pg.PlotCurveItem(pen=pg.mkPen(LASSO_PEN, width=2))
        self.outline.setZValue(1000)  # over the points (added later): at 100k they cover the whole map
        self.addItem(self.outline, ignoreBounds=True)  # never counted in autoRange
        self._drawn: list[tuple[float, float]] = []
        self._last_px = None

    def set_lasso(self, on: bool) -> None:
        self.lasso_on = on

    def clear_outline(self) -> None:
        self._drawn = []
        self.outline.setData([], [])

    def mouseDragEvent(self, ev, axis=None) -> None:  # noqa: N802 (pyqtgraph's name)
        if not self.lasso_on or ev.button() != Qt.LeftButton:
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        if ev.isStart():
            self._drawn, self._last_px = [], None
            self._add(ev.buttonDownPos())
        self._add(ev.pos())
        if ev.isFinish():
            outline = np.asarray(self._drawn, np.float64)
            self._show(closed=True)
            if len(outline) >= 3:
                self.lasso_drawn.emit(outline)

    def _add(self, pos) -> None:
        if self._last_px is not None and (pos - self._last_px).manhattanLength() < MIN_STEP_PX:
            return
        self._last_px = pos
        point = self.mapToView(pos)
        self._drawn.append((point.x(), point.y()))
        self._show(closed=False)

    def _show(self, closed: bool) -> None:
        xy = np.asarray(self._drawn + self._drawn[:1] if closed else self._drawn, np.float64).reshape(-1, 2)
        self.outline.setData(xy[:, 0], xy[:, 1])
