"""A grid of augmented training views, as a run with the current settings will see them."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class AugmentationPreviewView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid: np.ndarray | None = None  # the picture on screen (tests read it)
        self.plot = pg.GraphicsLayoutWidget()
        self.box = self.plot.addViewBox(lockAspect=True, invertY=True)
        self.item = pg.ImageItem()
        self.box.addItem(self.item)
        self.label = QLabel("Choose a dataset, then “Preview augmentation”: 16 training views as the run will see "
                            "them with the settings on the left.")
        self.label.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addWidget(self.plot, 1)

    def clear(self, text: str) -> None:
        """No views on screen (another dataset was chosen: the last one's stayed)."""
        self.grid = None
        self.item.clear()
        self.label.setText(text)

    def show_grid(self, grid: np.ndarray | None, config) -> None:
        if grid is None:
            self.label.setText("No readable image to preview.")
            return
        self.grid = grid
        self.item.setImage(grid, levels=(0, 255))
        self.box.autoRange(padding=0.01)
        if config.data_path == "features":
            self.label.setText("16 training views: the quick preset fits its head on the features of each image's "
                               "centre crop as the model sees it, with no augmentation.")
            return
        self.label.setText(f"16 training views: crops of {config.scale[0]:.2f}–{config.scale[1]:.2f} of the image, "
                           f"flip p={config.hflip:.2f}, colour jitter {config.color_jitter or 'off'}, RandAugment "
                           f"{config.auto_augment or 'off'}. Change the advanced settings and preview again.")
