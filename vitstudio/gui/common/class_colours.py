"""Class colours over an image: one colour per class index (the Paint page's brush, its segmentation, the Paint
segmentation over the Attention tab's map)."""

from __future__ import annotations

import numpy as np

from vitstudio.app.paint_masks import UNPAINTED

# one colour per class index (background first: a cool blue the image shows through), cycled past eight
PALETTE = np.array([(40, 110, 230), (235, 60, 45), (40, 185, 80), (245, 200, 30), (170, 70, 210), (30, 200, 210),
                    (240, 130, 30), (150, 150, 150)], np.uint8)
PAINTED_ALPHA, SEGMENTED_ALPHA = 190, 95  # what the person painted stands out from what was inferred


def overlay(painted: np.ndarray | None, segmented: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray | None:
    """(H, W, 4) uint8: each pixel's class colour, strong where painted, faint where segmented, clear elsewhere."""
    if painted is None and segmented is None:
        return None
    rgba = np.zeros((*shape, 4), np.uint8)
    for labels, alpha in ((segmented, SEGMENTED_ALPHA), (painted, PAINTED_ALPHA)):
        if labels is None or labels.shape != tuple(shape):
            continue
        known = labels != UNPAINTED
        rgba[known, :3] = PALETTE[labels[known] % len(PALETTE)]
        rgba[known, 3] = alpha
    return rgba
