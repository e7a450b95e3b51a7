"""Mean attention distance of every head against layer depth (the ViT paper's Fig. 7 right), pyqtgraph scatter."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg


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
        self.setTitle(f"Mean attention distance per head ({source})", size="9pt")
        self.setToolTip("")

    def show_nothing(self) -> None:
        """An empty plot (not `clear`: PlotWidget forwards that name to its PlotItem, which drops every item)."""
        self.values = None
        self.scatter.setData([])
        self.setTitle("Mean attention distance per head", size="9pt")
        self.setToolTip("")

    def set_unavailable(self, short: str, reason: str | None = None) -> None:
        """No distance for this model: `short` as the title, the whole `reason` as the tooltip."""
        self.values = None
        self.scatter.setData([])
        self.setTitle(f"No attention distance: {short}", size="9pt")
        self.setToolTip(reason or short)
