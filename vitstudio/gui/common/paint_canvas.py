"""An image with a class mask over it, painted with the mouse at the image's own resolution: the canvas fits the
image in its rectangle (aspect kept, centred, pixels drawn as blocks so a painted pixel is seen where it is) and says
where the pointer is in the image's pixels (x right, y down, pixel centres at integers, as the painted masks count
them). It draws; what a press, a drag and a release paint is its listener's (the Paint page's model)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget


def rgba_image(array: np.ndarray) -> QImage:
    """(H, W, 3) or (H, W, 4) uint8 as a QImage that owns its pixels."""
    array = np.ascontiguousarray(array, np.uint8)
    h, w, channels = array.shape
    fmt = QImage.Format_RGBA8888 if channels == 4 else QImage.Format_RGB888
    return QImage(array.data, w, h, channels * w, fmt).copy()  # copy: the numpy buffer does not outlive this call


class PaintCanvas(QWidget):
    pressed = Signal(float, float)  # image pixels
    dragged = Signal(float, float)
    released = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.picture: QImage | None = None
        self.overlay: QImage | None = None
        self.brush_radius = 0.0  # image pixels: the circle drawn under the pointer
        self.hover: QPointF | None = None
        self.painting = False
        self.setMouseTracking(True)
        self.setMinimumSize(160, 160)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.setCursor(Qt.CrossCursor)
        self.setFocusPolicy(Qt.ClickFocus)  # a click on the image puts the page's Ctrl+Z in reach

    def set_picture(self, array: np.ndarray | None) -> None:
        self.picture = rgba_image(array) if array is not None else None
        self.overlay = None
        self.update()

    def set_overlay(self, rgba: np.ndarray | None) -> None:
        self.overlay = rgba_image(rgba) if rgba is not None else None
        self.update()

    def set_brush_radius(self, radius: float) -> None:
        self.brush_radius = float(radius)
        self.update()

    # -- where the image lies ----------------------------------------------------------------------------------
    def image_rect(self) -> QRectF:
        """The widget's rectangle the image is drawn in (fitted, aspect kept, centred)."""
        if self.picture is None:
            return QRectF()
        w, h = self.picture.width(), self.picture.height()
        scale = min(self.width() / w, self.height() / h)
        return QRectF((self.width() - w * scale) / 2, (self.height() - h * scale) / 2, w * scale, h * scale)

    def to_image(self, pos: QPointF) -> tuple[float, float]:
        """A widget point in the image's pixels: pixel (i, j) spans [i, i + 1) × [j, j + 1) of the drawn grid, so its
        centre, i + 0.5 there, is i here."""
        rect = self.image_rect()
        scale = rect.width() / self.picture.width()
        return (pos.x() - rect.left()) / scale - 0.5, (pos.y() - rect.top()) / scale - 0.5

    # -- drawing and the mouse ---------------------------------------------------------------------------------
    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        if self.picture is None:  # the page's line says what to do
            return
        rect = self.image_rect()
        painter.drawImage(rect, self.picture)  # no smoothing: each pixel a block, the paint where it falls
        if self.overlay is not None:
            painter.drawImage(rect, self.overlay)
        if self.hover is not None and self.brush_radius:
            radius = (self.brush_radius + 0.5) * rect.width() / self.picture.width()
            painter.setRenderHint(QPainter.Antialiasing)
            painter.setPen(QPen(QColor(255, 255, 255), 1.5))
            painter.drawEllipse(self.hover, radius, radius)
            painter.setPen(QPen(QColor(0, 0, 0), 0.75))
            painter.drawEllipse(self.hover, radius + 1, radius + 1)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.LeftButton or self.picture is None:
            return
        self.painting = True
        self.pressed.emit(*self.to_image(event.position()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        self.hover = event.position() if self.picture is not None else None
        if self.painting and event.buttons() & Qt.LeftButton:
            self.dragged.emit(*self.to_image(event.position()))
        self.update()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.LeftButton and self.painting:
            self.painting = False
            self.released.emit()

    def leaveEvent(self, _event) -> None:
        self.hover = None
        self.update()
