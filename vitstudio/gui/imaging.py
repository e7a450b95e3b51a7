"""Conversions from core images/arrays to Qt pixmaps (no tensor math here)."""

from __future__ import annotations

import numpy as np
from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QLabel


def configure_pyqtgraph() -> None:
    """Row-major images everywhere, and plot colours that follow the system's light or dark palette."""
    import pyqtgraph as pg
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    palette = QApplication.palette()
    pg.setConfigOptions(imageAxisOrder="row-major", antialias=True,
                        background=palette.color(QPalette.Base), foreground=palette.color(QPalette.Text))


def pil_to_pixmap(image: Image.Image | np.ndarray) -> QPixmap:
    arr = np.ascontiguousarray(np.asarray(image.convert("RGB") if isinstance(image, Image.Image) else image,
                                          dtype=np.uint8))
    h, w, _ = arr.shape
    qimage = QImage(arr.data, w, h, 3 * w, QImage.Format_RGB888)
    return QPixmap.fromImage(qimage.copy())  # copy: the numpy buffer does not outlive this call


def set_scaled_pixmap(label: QLabel, pixmap: QPixmap | None, size: int = 280) -> None:
    if pixmap is None:
        label.clear()
        return
    label.setPixmap(pixmap.scaled(size, size, Qt.KeepAspectRatio, Qt.SmoothTransformation))
