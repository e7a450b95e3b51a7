"""A grid with one small map per attention head; clicking a head selects it."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal

from ..common.map_view import lookup_table


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
            label = cell.addLabel(f"head {h}", row=0, col=0, size="8pt")
            view = cell.addViewBox(row=1, col=0, lockAspect=True, invertY=True, enableMouse=False)
            view.setMenuEnabled(False)
            item = pg.ImageItem()
            view.addItem(item)
            self.views.append(view)
            self.items.append(item)
            self.labels.append(label)

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
