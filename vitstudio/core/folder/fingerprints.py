"""Model-free fingerprints of an image, from one decode: the 64-bit perceptual hash (bit for bit
`imagehash.phash`, and the hash of the mirrored image) and a 16×16 grey thumbnail (zero mean, unit norm, and
mirrored) whose dot product is the Pearson correlation of the two thumbnails.

These are the folder audit's model-free signals (`duplicates.py`); they depend only on the bytes of the file, so a
cache keyed by content may keep them (64 + 64 bits and 2 × 256 float32 per image).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from vitstudio.core.data.images import ImageReadError, read_image

HASH_BITS = 64
THUMB = 16  # the thumbnail's side


@dataclass(frozen=True)
class Fingerprints:
    index: np.ndarray  # (n,) int64: the row of each fingerprinted image in the paths given (unreadable skipped)
    bits: np.ndarray  # (n, 64) bool, imagehash.phash(image).hash flattened
    mirror_bits: np.ndarray  # (n, 64) bool, the same of the left-right mirrored image
    thumbs: np.ndarray  # (n, 256) float32, zero mean, unit norm (from the cache: a `RowView` of its file)
    mirror_thumbs: np.ndarray  # (n, 256) float32
    errors: tuple[tuple[str, str], ...] = ()  # (path, reason) of the files that could not be read


# The DCT-II of a sequence reversed is the DCT-II of the sequence with its odd frequencies negated: the mirrored
# image's low frequencies are this image's with the odd horizontal ones' signs flipped (one transform, not two)
_MIRROR_SIGNS = np.where(np.arange(8) % 2, -1.0, 1.0)[None, :]


def _phash_pair(grey: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """imagehash.phash on a 32×32 grey array and on its left-right mirror: the 8×8 lowest DCT-II frequencies above
    their median."""
    from scipy.fftpack import dct

    low = dct(dct(grey, axis=0), axis=1)[:8, :8]
    mirrored = low * _MIRROR_SIGNS
    return (low > np.median(low)).reshape(-1), (mirrored > np.median(mirrored)).reshape(-1)


def _unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32).reshape(-1)
    x = x - x.mean()
    norm = float(np.linalg.norm(x))
    return x / norm if norm > 1e-6 else x  # a flat image: all zeros, correlates with nothing


def fingerprint(img: Image.Image) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bits, mirrored bits, thumbnail, mirrored thumbnail) of one image."""
    # imagehash: convert('L'), resize to 32×32 with ANTIALIAS (= LANCZOS); LANCZOS is symmetric, so the mirrored
    # image's 32×32 is this one mirrored (checked against imagehash on the mirrored image in the tests)
    grey = np.asarray(img.convert("L").resize((32, 32), Image.LANCZOS))
    thumb = _unit(grey.astype(np.float32).reshape(THUMB, 2, THUMB, 2).mean((1, 3)))  # (16, 16) by 2×2 means
    return (*_phash_pair(grey), thumb, np.ascontiguousarray(thumb.reshape(THUMB, THUMB)[:, ::-1]).reshape(-1))


def detail(img: Image.Image) -> np.ndarray:
    """(32, 32) float32, zero mean, unit norm: the grey image at 32×32 less its 5×5 local mean (fine structure).
    Used only to confirm mirrored matches (computed for those pairs alone, so not kept per image)."""
    from scipy.ndimage import uniform_filter

    grey = np.asarray(img.convert("L").resize((32, 32), Image.LANCZOS), np.float32)
    return _unit(grey - uniform_filter(grey, 5, mode="nearest")).reshape(32, 32)


def fingerprints(paths: Sequence[str]) -> Fingerprints:
    """Fingerprints of every readable file of `paths` (one decode each); unreadable ones listed in `errors`."""
    rows, parts, errors = [], [], []
    for k, path in enumerate(paths):
        try:
            parts.append(fingerprint(read_image(path)))
            rows.append(k)
        except ImageReadError as exc:
            errors.append((str(path), str(exc)))
    if not parts:
        empty_bits, empty = np.zeros((0, HASH_BITS), bool), np.zeros((0, THUMB * THUMB), np.float32)
        return Fingerprints(np.zeros(0, np.int64), empty_bits, empty_bits, empty, empty, tuple(errors))
    bits, mbits, thumbs, mthumbs = (np.stack(p) for p in zip(*parts))
    return Fingerprints(np.asarray(rows, np.int64), bits, mbits, thumbs, mthumbs, tuple(errors))
