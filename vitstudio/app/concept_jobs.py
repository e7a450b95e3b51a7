"""The Concepts page's jobs (a concept's top patches outlined, the concepts read on one image) and its fit warning:
module-level, every input passed explicitly, run by whichever runner the face gives. The core is imported inside
each: the app layer loads no torch until a job runs."""

from __future__ import annotations

from pathlib import Path


def crops_job(cancel, model, tops: tuple):
    """(crop with the patch outlined, caption) of each (path, patch, activation); unreadable images are left out."""
    from vitstudio.core.concepts.stats import outlined_crop
    from vitstudio.core.data.images import ImageReadError

    out = []
    for path, patch, activation in tops:
        cancel.raise_if_cancelled()
        try:
            out.append((outlined_crop(model, path, patch), f"{Path(path).name}\n{activation:.3g}"))
        except (ImageReadError, OSError):
            continue
    return out


def image_job(cancel, model, image, path: str, file: str, scales: tuple):
    """The concepts read on `image` (None: the file at `path`, a row of the folder), and the picture read."""
    from vitstudio.core.concepts.maps import read_image
    from vitstudio.core.data.images import read_image as read_file

    image = image if image is not None else read_file(path)
    return read_image(cancel, model, image, file, scales), image


def poor_fit_warning(concepts) -> str:
    """What a poor fit of the learned concepts means and what to change, or "" when they fit
    (core/concepts/learn.py)."""
    from vitstudio.core.concepts.learn import poor_fit_warning as warning

    return warning(concepts)
