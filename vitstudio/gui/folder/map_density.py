"""The map of a large folder drawn as one image instead of one scatter item per colour: at 100k points pyqtgraph's
ScatterPlotItem spends ~0.5 s building its per-point symbol keys and paints every dot on every frame of a pan (14
frames/s on a loaded machine). Here each point is a disc of the scatter's size splatted into an RGBA raster at the
screen's resolution, in the groups' order (the last group on top, as the scatter items stack), its opacity rising
with how many points overlap there (a density layer, datashader's idea). The raster covers the view and a quarter
of a view around it, so a pan moves one image; it is drawn again once the view rests (zoomed in: finer), off the GUI
thread (an interactive job: ~35 ms alone, 0.2-0.5 s while the model fit and the brain's scores ran beside it,
all of it a stall when it ran here); the last raster stays on screen until the next arrives. Selection is not
drawn here: the box and the lasso select the full-resolution points (FolderModel.select_lasso, rows_in_box)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer

from vitstudio.gui import workers

DENSE_ABOVE = 20000  # points: more are drawn as this raster (10k as scatter items pan at 160 frames/s)
DOT_PX = 7  # the scatter's symbol size
REST_MS = 120  # the view still for this long: drawn again for its new range
MARGIN = 0.25  # of a view on each side: a pan of up to a quarter of a view stays drawn
MIN_ALPHA, FULL_AT = 150, 8  # one point's opacity (of 255); the count at which a pixel is opaque


def disc_offsets(diameter: int = DOT_PX) -> np.ndarray:
    """(K, 2) pixel offsets (dx, dy) covered by a dot of this diameter around its centre pixel."""
    r = (diameter - 1) / 2
    d = np.arange(-int(np.ceil(r)), int(np.ceil(r)) + 1)
    dx, dy = np.meshgrid(d, d)
    inside = dx ** 2 + dy ** 2 <= r * r + 0.5
    return np.stack([dx[inside], dy[inside]], 1)


def splat(coords: np.ndarray, groups: list, extent: tuple[float, float, float, float], size: tuple[int, int],
          diameter: int = DOT_PX) -> np.ndarray:
    """(H, W, 4) uint8 RGBA: every point of `groups` ((name, RGB, rows) each) as a disc in its group's colour over
    `extent` (x0, y0, width, height in map coordinates; row 0 at y0), later groups over earlier ones; opacity from
    how many discs cover a pixel. The points' centres are put on a padded grid (the last group's number and a count
    per pixel), then the disc is one maximum and one sum over its ~30 shifts of the grid: the cost is the raster's,
    not the points' (100k points on 1200×920 pixels: ~0.08 s)."""
    width, height = size
    x0, y0, w, h = extent
    pad = (diameter + 1) // 2
    padded = (height + 2 * pad, width + 2 * pad)
    top = np.zeros(padded[0] * padded[1], np.uint8)  # 1 + the last group with a centre here (0: none)
    count = np.zeros(padded[0] * padded[1], np.int64)
    palette = np.zeros((len(groups) + 1, 3), np.uint8)
    for g, (_name, rgb, rows) in enumerate(groups[:255], 1):
        palette[g] = rgb
        xy = coords[np.asarray(rows, np.int64)]
        px = np.floor((xy[:, 0] - x0) / w * width).astype(np.int64) + pad
        py = np.floor((xy[:, 1] - y0) / h * height).astype(np.int64) + pad
        inside = (px >= 0) & (px < padded[1]) & (py >= 0) & (py < padded[0])
        flat = py[inside] * padded[1] + px[inside]
        top[flat] = g
        count += np.bincount(flat, minlength=len(count))
    # bytes from here on (a count past FULL_AT shows as FULL_AT; 29 shifts × 8 < 256): a quarter of int32's traffic
    top, count = top.reshape(padded), np.minimum(count, FULL_AT).astype(np.uint8).reshape(padded)
    group, covered = np.zeros((height, width), np.uint8), np.zeros((height, width), np.uint8)
    for dx, dy in disc_offsets(diameter):  # a pixel shows the topmost disc over it, opaque as the discs pile up
        window = (slice(pad - dy, pad - dy + height), slice(pad - dx, pad - dx + width))
        np.maximum(group, top[window], out=group)
        covered += count[window]
    piled = np.minimum(covered, FULL_AT).astype(np.int32) - 1  # discs over a pixel beyond the first (-1: none)
    alpha = np.where(piled >= 0, MIN_ALPHA + (255 - MIN_ALPHA) * piled // (FULL_AT - 1), 0).astype(np.uint8)
    return np.dstack([palette[group], alpha])


def raster_job(cancel, coords: np.ndarray, groups: list, extent: tuple, size: tuple[int, int]):
    return extent, splat(coords, groups, extent, size)


class DensityLayer:
    """The raster of a map's points on its view box, drawn again for the view's range once the view rests."""

    def __init__(self, view: pg.ViewBox) -> None:
        self.view = view
        self.image = pg.ImageItem()
        self.image.setVisible(False)
        view.addItem(self.image, ignoreBounds=True)  # the points' bounds come from `bounds` (autoRange)
        self.bounds = pg.PlotCurveItem(pen=None)  # two invisible corners: autoRange sees the points' extent
        view.addItem(self.bounds)
        self.coords, self.groups = np.zeros((0, 2), np.float32), []
        self.drawn_for = None  # what the raster shows or is being drawn for: (range, pixel size, groups)
        self.raster = workers.KeyedSlot()  # the latest view's raster, made off the GUI thread
        self.timer = QTimer(singleShot=True, interval=REST_MS, timeout=self.draw)
        view.sigRangeChanged.connect(self._on_range)

    @property
    def shown(self) -> bool:
        return self.image.isVisible()

    def show(self, coords: np.ndarray, groups: list) -> None:
        """Draw these points (drawn on the next turn of the event loop: after an autoRange in this one)."""
        self.coords, self.groups, self.drawn_for = coords, groups, None
        lo, hi = coords.min(0), coords.max(0)
        self.bounds.setData([lo[0], hi[0]], [lo[1], hi[1]])
        self.image.setVisible(True)
        QTimer.singleShot(0, self.draw)

    def hide(self) -> None:
        self.timer.stop()
        self.raster.cancel()
        self.coords, self.groups = np.zeros((0, 2), np.float32), []
        self.drawn_for = None
        self.image.setVisible(False)
        self.image.clear()
        self.bounds.setData([], [])

    def _on_range(self, *_) -> None:
        if self.shown:
            self.timer.start()  # restarted by every step of a pan: drawn once it stops

    def draw(self) -> None:
        """The raster for the current view range and a margin around it, one image pixel per screen pixel."""
        (x0, x1), (y0, y1) = self.view.viewRange()
        px = self.view.viewPixelSize()  # map units per screen pixel (x, y)
        key = ((x0, x1, y0, y1), px, id(self.groups))
        if not self.shown or not len(self.coords) or key == self.drawn_for:
            return
        self.drawn_for = key
        w, h = (x1 - x0) * (1 + 2 * MARGIN), (y1 - y0) * (1 + 2 * MARGIN)
        size = (max(1, min(4096, round(w / px[0]))), max(1, min(4096, round(h / px[1]))))
        extent = (x0 - (x1 - x0) * MARGIN, y0 - (y1 - y0) * MARGIN, w, h)
        self.raster.start(key, "Map raster", raster_job, self.coords, self.groups, extent, size,
                          on_result=self._on_raster)

    def _on_raster(self, drawn: tuple) -> None:
        extent, image = drawn
        self.image.setImage(image, autoLevels=False, levels=(0, 255))
        self.image.setRect(QRectF(*extent))

    def nearest(self, x: float, y: float, radius_px: float = DOT_PX / 2 + 1) -> int | None:
        """The row of the point under (x, y) (map coordinates) within a dot's radius on screen, or None."""
        if not self.shown or not len(self.coords):
            return None
        sx, sy = self.view.viewPixelSize()
        d2 = ((self.coords[:, 0] - x) / sx) ** 2 + ((self.coords[:, 1] - y) / sy) ** 2
        best = int(np.argmin(d2))
        return best if d2[best] <= radius_px ** 2 else None
