"""Thumbnails of a folder's images for the views that show many (the table, the gallery, the label review, the
map's hover): decoded off the GUI thread, in the order asked, an unreadable file given as None, never a failed
batch. The views choose the size."""

from __future__ import annotations

import numpy as np


def thumbnail_job(cancel, paths: list[str], side: int):
    """The keyed-job form of `thumbnails` (inputs after the cancel token)."""
    return thumbnails(paths, cancel, side)


def thumbnails(paths: list[str], cancel, side: int):
    """(path, RGB uint8 array ≤ `side` px) per file, None for unreadable ones."""
    from vitstudio.core.data.images import ImageReadError, read_image

    for path in paths:
        cancel.raise_if_cancelled()
        try:
            img = read_image(path)
            img.thumbnail((side, side))
            yield path, np.asarray(img.convert("RGB"))
        except ImageReadError:
            yield path, None


def hover_job(cancel, path: str, side: int):
    """[(path, thumbnail or None)] of the one image under the map's pointer."""
    return list(thumbnails([path], cancel, side))
