"""Painted masks: one PNG per painted image, named by the image's file stem, each pixel a class index (0 = the first
class, background by default; 255 = not painted), at the image's own size — what the GUI's painting saves and what
`vitstudio segment --masks DIR` reads, and the format of the masks it writes.

A painted mask becomes per-patch labels on the crop the model sees (`LoadedModel.crop_box`: the same box the maps
are placed back in): each patch's share of every class among its painted pixels, as open-hummingbird-eval's
memory labels are each patch's pixel-class frequencies (`hbird/hbird_eval.py:318-320`). A patch enters the memory
bank only when at least MIN_PAINTED of its pixels are painted: a brush stroke's edge would otherwise label a whole
patch by the few pixels it touched.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from vitstudio.core.data.images import ImageReadError, check_pixels, image_size, open_regular
from vitstudio.core.files import shown_path

UNPAINTED = 255
MIN_PAINTED = 0.5
DEFAULT_CLASSES = ("background", "object")


@dataclass(frozen=True)
class PaintedMask:
    image: str  # the image it was painted on
    path: str  # the PNG
    labels: np.ndarray  # (H, W) uint8 class indices, UNPAINTED where nothing was painted


def upright_size(path: str | os.PathLike) -> tuple[int, int]:
    """(height, width) of the image as `read_image` returns it (EXIF orientation applied), from the header alone."""
    width, height = image_size(path)
    with _opened(path) as img:
        turned = img.getexif().get(0x0112) in (5, 6, 7, 8)  # orientations that swap the axes
    return (width, height) if turned else (height, width)


@contextlib.contextmanager
def _opened(path: str | os.PathLike) -> Iterator[Image.Image]:
    """`path` opened as an image the way `images.read_image` opens one: a regular file only (a FIFO named .png never
    blocks, a link to /dev/zero is never read), of a bounded size, its pixel count checked from the header; every
    failure, in the body too, an ImageReadError naming the file (a text file, a truncated PNG, a bomb, a folder, a
    dangling link)."""
    with open_regular(path) as f:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                img = Image.open(f)
            with img:
                check_pixels(path, *img.size)
                yield img
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ImageReadError(path, f"image too large to open safely ({exc})") from None
        except UnidentifiedImageError:
            raise ImageReadError(path, "not an image file (unrecognised format)") from None
        except MemoryError:
            raise ImageReadError(path, "not enough memory to decode this image") from None
        except (OSError, SyntaxError, ValueError, EOFError) as exc:  # Pillow's words for truncated or corrupt data
            raise ImageReadError(path, f"corrupt or truncated image ({' '.join(str(exc).split())})") from None


def read_painted(path: str | os.PathLike) -> np.ndarray:
    """(H, W) uint8 class indices of a painted PNG (greyscale or palette: a pixel's value is its class); a file
    that is no such image is an ImageReadError naming it, one of another mode a ValueError."""
    with _opened(path) as img:
        mode = img.mode
        labels = np.asarray(img, dtype=np.uint8) if mode in ("L", "P") else None
    if labels is None:
        raise ValueError(f"{shown_path(Path(path).name)} is a {mode} image: a painted mask holds one class index "
                         f"per pixel (an 8-bit greyscale or palette PNG; 255 = not painted)")
    return labels


def labels_png(labels: np.ndarray) -> bytes:
    """(H, W) uint8 class indices as an 8-bit greyscale PNG (the painted masks' own format)."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(labels, np.uint8), "L").save(buf, format="PNG")
    return buf.getvalue()


def match_painted(painted_dir: str | os.PathLike, images: list[str]) -> list[PaintedMask]:
    """Every PNG of `painted_dir` paired with the image of `images` that has its stem, its size checked; ValueError
    in one line for a mask that names no image, names several, or no longer has its image's size."""
    folder = Path(painted_dir)
    if not folder.is_dir():
        raise ValueError(f"--masks {folder} is not a folder of painted masks (one PNG per painted image)")
    by_stem: dict[str, list[str]] = {}
    for image in images:
        by_stem.setdefault(Path(image).stem, []).append(image)
    found = []
    for png in _mask_files(folder):
        named = by_stem.get(png.stem, [])
        if not named:
            raise ValueError(f"painted mask {png.name} names no image of the folder (no image has the stem "
                             f"'{png.stem}')")
        if len(named) > 1:
            raise ValueError(f"painted mask {png.name} names {len(named)} images of the folder "
                             f"({', '.join(Path(n).name for n in named[:3])}): give each image its own stem")
        try:
            labels = read_painted(png)
        except ImageReadError as exc:
            raise ValueError(f"painted mask {shown_path(png.name)} cannot be read: {exc.reason}") from None
        try:
            size = upright_size(named[0])
        except ImageReadError as exc:
            raise ValueError(f"painted mask {shown_path(png.name)} is of {shown_path(exc.path)}, which cannot be "
                             f"read: {exc.reason}") from None
        if labels.shape != size:
            raise ValueError(f"painted mask {png.name} is {labels.shape[1]}×{labels.shape[0]} but its image "
                             f"{Path(named[0]).name} is {size[1]}×{size[0]}: the image changed since it was "
                             f"painted; paint it again")
        found.append(PaintedMask(named[0], str(png), labels))
    if not found:
        raise ValueError(f"--masks {folder} holds no painted mask (PNG named by an image's stem)")
    return found


def _mask_files(folder: Path) -> list[Path]:
    """The PNGs of a painted masks' folder, the suffix in any case (X.PNG is a mask as X.png is); ValueError for two
    that name one image (X.png beside X.PNG: which one was painted last is not for the app to guess)."""
    pngs = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".png")
    by_stem: dict[str, Path] = {}
    for png in pngs:
        if png.stem in by_stem:
            raise ValueError(f"painted masks {shown_path(by_stem[png.stem].name)} and {shown_path(png.name)} both "
                             f"name the image '{shown_path(png.stem)}': keep one of them in {shown_path(folder)}")
        by_stem[png.stem] = png
    return pngs


def class_names(painted: list[PaintedMask], given: tuple[str, ...] | None) -> tuple[str, ...]:
    """The classes the masks paint: `given`, or background/object (class-N past two); ValueError for an index
    beyond them or a class no mask paints (the bank could never predict it)."""
    counts = np.zeros(256, np.int64)
    for mask in painted:
        counts += np.bincount(mask.labels.ravel(), minlength=256)
    counts[UNPAINTED] = 0
    used = np.flatnonzero(counts)
    if not len(used):
        raise ValueError("the painted masks paint no pixel (every pixel is 255, not painted)")
    top = int(used.max())
    names = tuple(given) if given else (*DEFAULT_CLASSES, *(f"class-{i}" for i in range(2, top + 1)))[:max(2, top + 1)]
    if top >= len(names):
        raise ValueError(f"the painted masks use class {top}, but only {len(names)} classes are named "
                         f"({', '.join(names)})")
    missing = [f"'{n}' ({i})" for i, n in enumerate(names) if counts[i] == 0]
    if missing:
        raise ValueError(f"no pixel of class {', '.join(missing)} is painted: paint some, or leave it out of "
                         f"--classes")
    return names


def patch_shares(labels: np.ndarray, box: tuple[int, int, int, int], grid: tuple[int, int],
                 patch: tuple[int, int], classes: int) -> tuple[np.ndarray, np.ndarray]:
    """((gh · gw, C) each patch's share of every class among its painted pixels, (gh · gw,) bool: at least
    MIN_PAINTED of the patch is painted). The mask's part under the crop box is resized to the model's input
    (nearest: class indices are not blended) and cut into patches, as hbird's `_patchify_gt` does
    (`hbird/hbird_eval.py:555-573`)."""
    top, left, h, w = box
    (gh, gw), (ph, pw) = grid, patch
    crop = Image.fromarray(np.asarray(labels[top:top + h, left:left + w], np.uint8))
    crop = crop.resize((gw * pw, gh * ph), Image.NEAREST)
    cells = np.asarray(crop).reshape(gh, ph, gw, pw).transpose(0, 2, 1, 3).reshape(-1, ph * pw)
    onehot = np.stack([(cells == c).sum(1) for c in range(classes)], 1).astype(np.float32)  # (P, C) pixel counts
    painted = onehot.sum(1)
    shares = onehot / np.maximum(painted, 1)[:, None]
    return shares, painted >= MIN_PAINTED * ph * pw
