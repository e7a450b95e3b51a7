"""An image with a patch-map overlay (pyqtgraph) and its colour bar, a click-to-pick patch grid and a marker."""

from __future__ import annotations

import functools

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Signal
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem

from vitstudio.app.map_pictures import colorize, upsample


@functools.lru_cache(maxsize=32)
def lookup_table(cmap: str) -> np.ndarray:
    """(256, 3) uint8 from matplotlib's definition, the same colours as the CLI's pictures (cached: every slider
    move redraws with it)."""
    return colorize(np.linspace(0.0, 1.0, 256, dtype=np.float32), cmap)


@functools.lru_cache(maxsize=32)
def colour_map(cmap: str) -> pg.ColorMap:
    """The same 256 colours as a pyqtgraph ColorMap, for the colour bar."""
    return pg.ColorMap(np.linspace(0.0, 1.0, 256), lookup_table(cmap))


class MapView(pg.GraphicsLayoutWidget):
    """The crop the model saw, with a (gh, gw) map over it: bilinear (`smooth`, the default, as the CLI draws
    it) or one cell per patch.

    `values` holds exactly the map the analysis returned (tests read it); `overlay.image` what is drawn.
    Clicking emits the patch (row, col).
    """

    patch_clicked = Signal(int, int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumSize(260, 260)
        # no context menu: built with the view otherwise (two axis forms per view, ~5 ms), only to be dropped
        self.view = self.addViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.image = pg.ImageItem()
        self.overlay = pg.ImageItem()
        self.overlay.setZValue(10)
        self.marker = QGraphicsRectItem()
        self.marker.setPen(QPen(QColor("#00e5ff"), 0))
        self.marker.setZValue(20)
        self.marker.setVisible(False)
        for item in (self.image, self.overlay, self.marker):
            self.view.addItem(item)
        self._size = (0, 0)  # crop (H, W)
        self._grid = (0, 0)
        self.values: np.ndarray | None = None
        self.smooth = True
        self._colour_bar: pg.ColorBarItem | None = None
        self.scene().sigMouseClicked.connect(self._on_click)

    @property
    def colour_bar(self) -> pg.ColorBarItem:
        """What the overlay's colours mean: the map's values from its lowest (bottom) to its highest (top). Built
        and placed the first time it is asked for (a plot of its own: ~15 ms, and the window holds eleven views, most
        never showing a scalar map), hidden until a scalar map is shown."""
        if self._colour_bar is None:
            self._colour_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=colour_map("inferno"), interactive=False,
                                               width=12, colorMapMenu=False)
            self.addItem(self._colour_bar, row=0, col=1)  # placed once: see _show_colour_bar
            self._colour_bar.setVisible(False)
        return self._colour_bar

    def set_image(self, crop: np.ndarray | None) -> None:
        if crop is None:
            self.image.clear()
            self.overlay.clear()
            self.marker.setVisible(False)
            return
        self.image.setImage(crop, levels=(0, 255))
        self._size = crop.shape[:2]
        self.view.autoRange(padding=0.01)

    def set_map(self, values: np.ndarray | None, cmap: str = "inferno", opacity: float = 0.6,
                levels: tuple[float, float] | None = None) -> None:
        """Show a (gh, gw) map through a colormap, or a (gh, gw, 3) RGB map in [0, 1] as is. A map that is zero
        everywhere (a concept that does not fire) is drawn empty: a colour bar from 0 to 0 has no meaning."""
        self.values = values
        empty = values is None or values.ndim == 2 and not np.any(np.nan_to_num(values))
        self._show_colour_bar(not empty and values.ndim == 2)
        if empty:
            self.overlay.clear()
            return
        h, w = self._size
        self._grid = values.shape[:2]
        drawn = self._smoothed(values) if self.smooth and h and w else values
        if values.ndim == 3:
            self.overlay.setImage(np.clip(drawn, 0.0, 1.0), levels=(0.0, 1.0), lut=None)
        else:
            if levels is None:
                # NaN: no attention there at all (outside a Swin window); drawn transparent, left out of the range
                finite = values[np.isfinite(values)]
                lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
                levels = (lo, hi if hi > lo else lo + 1e-12)
            self.overlay.setImage(drawn, levels=levels, lut=lookup_table(cmap))
            self.colour_bar.setColorMap(colour_map(cmap))
            self.colour_bar.setLevels(levels)
        self.overlay.setRect(QRectF(0, 0, w, h))
        self.overlay.setOpacity(opacity)

    def _show_colour_bar(self, shown: bool) -> None:
        """The bar sits right of the image while a scalar map is shown; hidden otherwise, where the layout gives an
        RGB map or a bare image the whole width. Hidden, not taken out of the layout: every move in or out of the
        scene reconnected pyqtgraph's view signals to the bar's button, and PySide6 kept a weak reference per
        connection (two per switch, for the window's lifetime)."""
        if shown or self._colour_bar is not None:
            self.colour_bar.setVisible(shown)

    def _smoothed(self, values: np.ndarray) -> np.ndarray:
        """Bilinear over patch centres at the crop's size, the CLI's upsampling (per channel for RGB maps)."""
        size = tuple(int(v) for v in self._size)
        if values.ndim == 2:
            return upsample(values, size)
        return np.stack([upsample(values[..., c], size) for c in range(values.shape[2])], axis=-1)

    def set_marker(self, patch: tuple[int, int] | None) -> None:
        if patch is None or not self._grid[0]:
            self.marker.setVisible(False)
            return
        (h, w), (gh, gw) = self._size, self._grid
        ph, pw = h / gh, w / gw
        self.marker.setRect(QRectF(patch[1] * pw, patch[0] * ph, pw, ph))
        self.marker.setVisible(True)

    def patch_at(self, x: float, y: float) -> tuple[int, int] | None:
        (h, w), (gh, gw) = self._size, self._grid
        if not (gh and 0 <= x < w and 0 <= y < h):
            return None
        return int(y // (h / gh)), int(x // (w / gw))

    def _on_click(self, event) -> None:
        if not self.view.sceneBoundingRect().contains(event.scenePos()):
            return
        point = self.view.mapSceneToView(event.scenePos())
        patch = self.patch_at(point.x(), point.y())
        if patch is not None:
            self.patch_clicked.emit(*patch)
