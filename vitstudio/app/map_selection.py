"""Selecting on the Folder tab's map, Qt-free: the points inside a free-form outline (the lasso) and how many of
each colour group a selection holds (the legend's counts)."""

from __future__ import annotations

import numpy as np


def rows_in_polygon(coords: np.ndarray, polygon) -> np.ndarray:
    """Rows of `coords` (N, 2) inside the closed `polygon` (M, 2; the last vertex joins the first), by the even-odd
    rule: a horizontal ray from the point crosses the outline an odd number of times (the crossing test of
    matplotlib's `Path.contains_points`, `_path.h: point_in_path_impl`). A self-crossing outline holds what it
    encloses an odd number of times. Vectorised over the points, one pass per edge, after a bounding-box cut."""
    coords = np.asarray(coords, np.float64).reshape(-1, 2)
    poly = np.asarray(polygon, np.float64).reshape(-1, 2)
    if len(poly) < 3 or not len(coords):
        return np.zeros(0, np.int64)
    lo, hi = poly.min(0), poly.max(0)
    candidates = np.flatnonzero(np.all((coords >= lo) & (coords <= hi), axis=1))
    x, y = coords[candidates, 0], coords[candidates, 1]
    inside = np.zeros(len(candidates), bool)
    x1, y1 = poly[:, 0], poly[:, 1]
    x2, y2 = np.roll(x1, -1), np.roll(y1, -1)
    for ax, ay, bx, by in zip(x1, y1, x2, y2):
        if ay == by:  # a horizontal edge is never crossed by a horizontal ray
            continue
        spans = (ay > y) != (by > y)
        crossing = ax + (y - ay) * (bx - ax) / (by - ay)
        inside ^= spans & (x < crossing)
    return candidates[inside]


def counts_inside(groups: list[np.ndarray], selected: np.ndarray | None) -> list[int]:
    """Per colour group (its rows), how many of them are selected; every row of it when nothing is."""
    if selected is None:
        return [len(rows) for rows in groups]
    return [int(np.isin(rows, selected).sum()) for rows in groups]
