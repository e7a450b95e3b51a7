"""Safe image reading: any file a user drops becomes an RGB PIL image or a clear, per-file error."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".pbm", ".jfif"}
)


class ImageReadError(Exception):
    """A file that could not be turned into an image; the message is meant for the user."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


def read_image(path: str | os.PathLike) -> Image.Image:
    """Open `path` as an upright 8-bit RGB image, or raise ImageReadError saying why not."""
    p = Path(path)
    if not p.exists():
        raise ImageReadError(p, "file not found")
    if p.is_dir():
        raise ImageReadError(p, "is a folder, not an image file")
    if not os.access(p, os.R_OK):
        raise ImageReadError(p, "permission denied (file is not readable)")
    if p.stat().st_size == 0:
        raise ImageReadError(p, "file is empty (0 bytes)")
    try:
        # Pillow only warns between MAX_IMAGE_PIXELS and twice that; we refuse at the limit itself,
        # because a model resizes to a few hundred pixels anyway and decoding a bomb exhausts memory.
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(p) as img:
                img.seek(0)  # animated GIF/WebP/APNG/TIFF: the first frame
                img.load()
                return to_rgb(img)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageReadError(p, f"image too large to open safely ({exc})") from None
    except UnidentifiedImageError:
        raise ImageReadError(p, "not an image file (unrecognised format)") from None
    except PermissionError:
        raise ImageReadError(p, "permission denied (file is not readable)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        # Pillow reports truncated or corrupt data as OSError/SyntaxError with its own wording.
        raise ImageReadError(p, f"corrupt or truncated image ({exc})") from None


def to_rgb(img: Image.Image) -> Image.Image:
    """Convert any Pillow mode to upright RGB: EXIF orientation, alpha on white, 16-bit scaled down."""
    img = ImageOps.exif_transpose(img)
    mode = img.mode
    if mode == "RGB":
        return img.copy()
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        return Image.fromarray(_high_depth_to_uint8(np.asarray(img), mode), "L").convert("RGB")
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        if img.mode == "RGB":
            return img
        mode = "RGBA"
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    # L, 1, CMYK, YCbCr, LAB, HSV: Pillow's own conversions are correct for these.
    return img.convert("RGB")


def _high_depth_to_uint8(arr: np.ndarray, mode: str) -> np.ndarray:
    """Scale a 16/32-bit integer or float single-channel array to 0..255."""
    values = arr.astype(np.float64)
    top = float(values.max()) if values.size else 0.0
    if mode.startswith("I;16"):
        scale = 65535.0  # the full 16-bit range, even for a dark image
    elif mode == "F" and top <= 1.0:
        scale = 1.0
    else:
        scale = 65535.0 if top > 255 else 255.0
    return np.clip(np.round(values / scale * 255.0), 0, 255).astype(np.uint8)


def expand_paths(paths: Iterable[str | os.PathLike], recursive: bool = True) -> Iterator[Path]:
    """Yield files: folders expand to the image files inside (sorted); files are passed through as given.

    Files given explicitly are yielded whatever their suffix, so a wrongly named file still gets a
    clear per-file message instead of vanishing silently.
    """
    for path in paths:
        p = Path(path)
        if p.is_dir():
            pattern = "**/*" if recursive else "*"
            yield from sorted(
                f for f in p.glob(pattern) if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES
            )
        else:
            yield p


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (exact-duplicate detection), read in 1 MB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def copy_candidate_digests(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """{path: SHA-256} for the files that could have an exact copy among `paths`: only files whose byte size
    another file shares are read and hashed (in a typical photo folder almost none), so finding exact copies costs
    a stat per file. Files that cannot be read are left out."""
    by_size: dict[int, list[str]] = {}
    for path in map(str, paths):
        try:
            by_size.setdefault(os.stat(path).st_size, []).append(path)
        except OSError:
            continue
    digests = {}
    for path in (p for group in by_size.values() if len(group) > 1 for p in group):
        try:
            digests[path] = file_digest(path)
        except OSError:
            continue
    return digests
