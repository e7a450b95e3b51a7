"""A grid with one small map per attention head, in cells of one size, under a title that says what they show;
clicking a head selects it."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSizePolicy

from ..common.map_view import lookup_table


class _HeadLabel(pg.LabelItem):
    """A head's title that asks for its height only: its text ("▶ head 10" in bold is wider than "head 2") must
    not make its column wider than the others."""

    def updateMin(self) -> None:  # noqa: N802 (pyqtgraph's name)
        super().updateMin()
        self.setMinimumWidth(0)
        self._sizeHint[Qt.SizeHint.MinimumSize] = (0, self._sizeHint[Qt.SizeHint.MinimumSize][1])
        self._sizeHint[Qt.SizeHint.PreferredSize] = (0, self._sizeHint[Qt.SizeHint.PreferredSize][1])
        self.updateGeometry()


class _Cell:
    """One head's place in the grid: its title above its map. Cells are made once and kept (a model with fewer
    heads leaves some out of the grid): making one takes ~10 ms of the GUI thread, and a model switch that
    changes the head count used to make them all again inside the load's delivery."""

    def __init__(self) -> None:
        self.layout = pg.GraphicsLayout()
        # every cell asks for the same size, so the grid splits the space evenly instead of by each label's
        # text ("▶ head 1" in bold is wider than "head 2")
        self.layout.setPreferredSize(1, 1)
        self.layout.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.label = _HeadLabel("", size="8pt")
        self.title: tuple[str, bool] | None = None
        self.layout.addItem(self.label, row=0, col=0)
        # no context menu, not even built: a ViewBox's menu is a dozen widgets
        self.view = self.layout.addViewBox(row=1, col=0, lockAspect=True, invertY=True, enableMouse=False,
                                           enableMenu=False)
        self.item = pg.ImageItem()
        self.view.addItem(self.item)

    def set_title(self, title: str, bold: bool) -> None:
        if (title, bold) != self.title:  # setText lays the title out again (a QGraphicsTextItem's HTML)
            self.title = (title, bold)
            self.label.setText(title, size="8pt", bold=bold)


class HeadGridWidget(pg.GraphicsLayoutWidget):
    head_clicked = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumWidth(220)
        self.cells: list[_Cell] = []  # every cell made so far; the first len(self.views) are in the grid
        self.views: list[pg.ViewBox] = []
        self.items: list[pg.ImageItem] = []
        self.labels: list[pg.LabelItem] = []
        self.title = _HeadLabel("", size="9pt")  # which layer, and that each head has its own colour range
        self.columns = 0
        self.setToolTip("Every head of the layer, each map on its own colour range; click a head to show it large")
        self.scene().sigMouseClicked.connect(self._on_click)

    def _rebuild(self, count: int) -> None:
        grid = self.ci
        if self.columns:
            grid.removeItem(self.title)
        for cell in self.cells[:len(self.views)]:
            grid.removeItem(cell.layout)  # out of the grid, kept for the next model
        while len(self.cells) < count:
            self.cells.append(_Cell())
        shown = self.cells[:count]
        self.columns = columns = max(1, math.ceil(math.sqrt(count)))
        grid.addItem(self.title, row=0, col=0, colspan=columns)
        for h, cell in enumerate(shown):
            row, col = divmod(h, columns)
            grid.addItem(cell.layout, row=row + 1, col=col)
        self.views = [c.view for c in shown]
        self.items = [c.item for c in shown]
        self.labels = [c.label for c in shown]
        for col in range(columns):
            grid.layout.setColumnStretchFactor(col, 1)
        grid.layout.setRowStretchFactor(0, 0)
        for row in range(math.ceil(count / columns)):
            grid.layout.setRowStretchFactor(row + 1, 1)

    def set_maps(self, maps: np.ndarray, cmap: str = "inferno", selected: int | None = None,
                 title: str = "") -> None:
        """maps: (heads, gh, gw); each head scaled to its own range; `title` above them."""
        if len(maps) != len(self.items):
            self._rebuild(len(maps))
        lut = lookup_table(cmap)
        for h, cell in enumerate(self.cells[:len(maps)]):
            finite = maps[h][np.isfinite(maps[h])]  # NaN outside a Swin window: transparent
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            cell.item.setImage(maps[h], levels=(lo, hi if hi > lo else lo + 1e-12), lut=lut)
            cell.view.autoRange(padding=0.02)
            cell.set_title(f"{'▶ ' if h == selected else ''}head {h}", bold=h == selected)
        if title != self.title.text:
            self.title.setText(title, size="9pt")

    def _on_click(self, event) -> None:
        for h, view in enumerate(self.views):
            if view.sceneBoundingRect().contains(event.scenePos()):
                self.head_clicked.emit(h)
                return
