"""Maps as the views draw them, the same pictures as the command line's: a colormap's colours and a (gh, gw) map
upsampled bilinearly over patch centres to the crop (core/analysis/overlays.py, imported when first used: it loads
torch and matplotlib, which the window does on a worker, never while it is first shown)."""

from __future__ import annotations

import numpy as np


def colorize(unit: np.ndarray, cmap: str) -> np.ndarray:
    """Values in [0, 1] -> uint8 RGB in matplotlib's colormap `cmap`."""
    from vitstudio.core.analysis.overlays import colorize as colours

    return colours(unit, cmap)


def upsample(values: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(gh, gw) -> (H, W), bilinear over patch centres."""
    from vitstudio.core.analysis.overlays import upsample as bilinear

    return bilinear(values, size)
