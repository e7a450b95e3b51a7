"""Planted segmentation data (tests/core/test_dense.py and tests/benchmarks/segment.py): a shape (a disc or a square
of one colour, with a little pixel noise) pasted at a random place and size on a varied background (crops of
scikit-image's texture photos), with its exact mask. Class 0 is the background, class 1 the shape."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from PIL import Image

BACKGROUNDS = ("brick", "grass", "gravel", "camera", "coffee", "moon", "text", "rocket")
SHAPE_COLOUR = (220, 40, 40)


@functools.cache  # ~0.7 s to decode the photos: once per process
def _backgrounds() -> tuple[np.ndarray, ...]:
    from skimage import data

    out = []
    for name in BACKGROUNDS:
        a = np.asarray(getattr(data, name)())
        if a.ndim == 2:
            a = np.stack([a] * 3, -1)
        out.append(a[..., :3].astype(np.uint8))
    return tuple(out)


def planted_image(rng: np.random.Generator, backgrounds: tuple[np.ndarray, ...], size: tuple[int, int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(H, W, 3) uint8 image, (H, W) uint8 mask (1 = the shape)."""
    h, w = size
    bg = backgrounds[rng.integers(len(backgrounds))]
    top, left = rng.integers(0, bg.shape[0] - h), rng.integers(0, bg.shape[1] - w)
    image = bg[top:top + h, left:left + w].copy()
    r = int(rng.integers(min(h, w) // 6, min(h, w) // 3))
    cy, cx = int(rng.integers(r, h - r)), int(rng.integers(r, w - r))
    yy, xx = np.mgrid[:h, :w]
    if rng.random() < 0.5:
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    else:
        mask = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
    noise = rng.normal(0, 12, (h, w, 3))
    image[mask] = np.clip(np.asarray(SHAPE_COLOUR) + noise[mask], 0, 255).astype(np.uint8)
    return image, mask.astype(np.uint8)


def planted_folder(folder: Path, count: int, size: tuple[int, int] = (48, 64), seed: int = 0
                   ) -> dict[str, np.ndarray]:
    """`count` planted images written as folder/img-NNN.png; {path: its true mask}."""
    folder.mkdir(parents=True, exist_ok=True)
    rng, backgrounds = np.random.default_rng(seed), _backgrounds()
    truth = {}
    for i in range(count):
        image, mask = planted_image(rng, backgrounds, size)
        path = folder / f"img-{i:03d}.png"
        Image.fromarray(image).save(path)
        truth[str(path)] = mask
    return truth


def mean_iou(predicted: list[np.ndarray], truth: list[np.ndarray], classes: int = 2, ignore: int = 255) -> float:
    """Mean over classes of the IoU summed over all images' pixels (pixels predicted `ignore` are left out)."""
    p = np.concatenate([a.ravel() for a in predicted])
    t = np.concatenate([a.ravel() for a in truth])
    keep = p != ignore
    p, t = p[keep], t[keep]
    ious = [((p == c) & (t == c)).sum() / max(1, ((p == c) | (t == c)).sum()) for c in range(classes)]
    return float(np.mean(ious))
