"""The Folder map coloured by one of the brain's scores: a continuous scale as confidence's (viridis in ten steps, a
colour bar naming the score and its range), the images without that score in grey."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from vitstudio.app.folder_scores import BINS, missing, score_bins, score_range

from .folder_map import CONFIDENCE_MAP

NO_SCORE = (150, 150, 150)


def score_groups(scores, name: str, count: int, classes: int) -> tuple[list, tuple[str, float, float] | bool]:
    """(groups, colour bar) of the map coloured by score `name` of `count` images: (step, RGB, rows) per step of the
    scale holding images, then the images without a score (all of them until the scores are computed); the colour
    bar's (label, low, high), or False where no image has the score (the legend names why)."""
    low, high = score_range(name, classes)
    values = np.full(count, np.nan) if scores is None else getattr(scores, name)
    cmap = pg.colormap.get(CONFIDENCE_MAP)
    width = (high - low) / BINS
    groups = [(f"{low + b * width:.2f}–{low + (b + 1) * width:.2f}",
               tuple(int(c) for c in cmap.map((b + 0.5) / BINS)[:3]), rows)
              for b, rows in score_bins(values, low, high)]
    without = np.flatnonzero(np.isnan(values))
    if len(without):
        groups.append((f"no {name}: {missing(scores, name)}", NO_SCORE, without))
    scored = len(without) < count  # none scored (not computed yet, or no class folders): the legend says why
    return groups, ((name, low, high) if scored else False)
