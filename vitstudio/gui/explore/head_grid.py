"""A grid with one small map per attention head, in cells of one size; clicking a head selects it."""

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


class HeadGridWidget(pg.GraphicsLayoutWidget):
    head_clicked = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumWidth(220)
        self.views: list[pg.ViewBox] = []
        self.items: list[pg.ImageItem] = []
        self.labels: list[pg.LabelItem] = []
        self.scene().sigMouseClicked.connect(self._on_click)

    def _rebuild(self, count: int) -> None:
        self.clear()
        self.views, self.items, self.labels = [], [], []
        columns = max(1, math.ceil(math.sqrt(count)))
        for h in range(count):
            row, col = divmod(h, columns)
            cell = self.addLayout(row=row, col=col)
            # every cell asks for the same size, so the grid splits the space evenly instead of by each label's
            # text ("▶ head 1" in bold is wider than "head 2")
            cell.setPreferredSize(1, 1)
            cell.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
            label = _HeadLabel(f"head {h}", size="8pt")
            cell.addItem(label, row=0, col=0)
            # no context menu, not even built: a ViewBox's menu is a dozen widgets, and a model switch rebuilds
            # the grid on the GUI thread (~0.1 s a head)
            view = cell.addViewBox(row=1, col=0, lockAspect=True, invertY=True, enableMouse=False, enableMenu=False)
            item = pg.ImageItem()
            view.addItem(item)
            self.views.append(view)
            self.items.append(item)
            self.labels.append(label)
        grid = self.ci.layout
        for col in range(columns):
            grid.setColumnStretchFactor(col, 1)
        for row in range(math.ceil(count / columns)):
            grid.setRowStretchFactor(row, 1)

    def set_maps(self, maps: np.ndarray, cmap: str = "inferno", selected: int | None = None) -> None:
        """maps: (heads, gh, gw); each head scaled to its own range."""
        if len(maps) != len(self.items):
            self._rebuild(len(maps))
        lut = lookup_table(cmap)
        for h, (item, view, label) in enumerate(zip(self.items, self.views, self.labels)):
            finite = maps[h][np.isfinite(maps[h])]  # NaN outside a Swin window: transparent
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            item.setImage(maps[h], levels=(lo, hi if hi > lo else lo + 1e-12), lut=lut)
            view.autoRange(padding=0.02)
            mark = "▶ " if h == selected else ""
            label.setText(f"{mark}head {h}", size="8pt", bold=h == selected)

    def _on_click(self, event) -> None:
        for h, view in enumerate(self.views):
            if view.sceneBoundingRect().contains(event.scenePos()):
                self.head_clicked.emit(h)
                return
