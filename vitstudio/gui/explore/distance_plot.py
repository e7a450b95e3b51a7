"""Mean attention distance of every head against layer depth (the ViT paper's Fig. 7 right), pyqtgraph scatter."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics

TITLE_SIZE = "9pt"


class DistancePlotWidget(pg.PlotWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(160)
        self.setLabel("bottom", "layer")
        self.setLabel("left", "distance", units="px")
        self.showGrid(x=True, y=True, alpha=0.2)
        self.scatter = pg.ScatterPlotItem(size=7, pen=None)
        self.addItem(self.scatter)
        self.values: np.ndarray | None = None
        self.full_title = ""  # drawn elided to the plot's width, whole in the tooltip

    def set_distance(self, distance: np.ndarray, source: str) -> None:
        """distance: (layers, heads); one dot per head, coloured by head index."""
        self.values = distance
        layers, heads = distance.shape
        cmap = pg.colormap.get("viridis")
        spots = []
        for h in range(heads):
            color = cmap.map(h / max(1, heads - 1), mode="qcolor")
            for layer in range(layers):
                if not np.isfinite(distance[layer, h]):  # CaiT's class-attention layers have no patch queries
                    continue
                spots.append({"pos": (layer, float(distance[layer, h])), "brush": pg.mkBrush(color),
                              "data": (layer, h)})
        self.scatter.setData(spots)
        step = max(1, layers // 12)  # whole layers only
        self.getAxis("bottom").setTicks([[(i, str(i)) for i in range(0, layers, step)]])
        # what it was measured on first: elided at 1280×720, the end is what goes, and the plot could be of either
        self.set_title(f"{source[:1].upper()}{source[1:]}: attention distance per head")

    def show_nothing(self) -> None:
        """An empty plot (not `clear`: PlotWidget forwards that name to its PlotItem, which drops every item)."""
        self.values = None
        self.scatter.setData([])
        self.set_title("Attention distance per head")

    def set_unavailable(self, short: str, reason: str | None = None) -> None:
        """No distance for this model: `short` as the title, the whole `reason` as the tooltip."""
        self.values = None
        self.scatter.setData([])
        self.set_title(f"No attention distance: {short}", reason or short)

    def set_title(self, title: str, tooltip: str | None = None) -> None:
        """The title, cut with … where the plot is narrower than it (a pyqtgraph title is clipped, not wrapped);
        the whole title (or `tooltip`) on hover."""
        self.full_title = title
        self.setToolTip(tooltip or "")
        self._draw_title()

    def _draw_title(self) -> None:
        font = QFont()
        font.setPointSizeF(9)
        # the title sits over the plot area only: the left axis (~50 px with its label) is not its to use,
        # and a wider title stretches the plot past the widget's right edge (the last layer's dots hidden)
        room = self.width() - 24 - self.getAxis("left").width()
        shown = QFontMetrics(font).elidedText(self.full_title, Qt.ElideRight, max(40, int(room)))
        self.setTitle(shown, size=TITLE_SIZE)
        if shown != self.full_title and not self.toolTip():
            self.setToolTip(self.full_title)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if getattr(self, "full_title", ""):  # PlotWidget resizes once inside its own __init__, before ours ran
            self._draw_title()
