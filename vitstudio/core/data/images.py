"""Safe image reading: any file a user drops becomes an RGB PIL image or a clear, per-file error.

One reader for both decoders: only regular files are opened (a symbolic link is followed only to a regular file,
so a FIFO never hangs a read and a link to /dev/zero is never read), a file's size is bounded, and an image's pixel
count is checked from its header before anything is decoded (PIL's `MAX_IMAGE_PIXELS`; the tensor decoder checks a
JPEG's frame header against the same limit). Images more than `MAX_ASPECT` times longer than wide (a 1×60000 strip)
keep only their centre, so resizing them for a model stays small. `expand_paths` walks folders and yields, besides
the image files, every entry that looks like one but cannot be used (links that dangle or loop, folders and FIFOs
named like images, HEIC files…), so each gets its reason from the reader instead of vanishing.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError, features

from vitstudio.core.errors import UserFacingError
from vitstudio.core.files import special_kind

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".pbm", ".jfif"}
    | ({".avif"} if features.check("avif") else set())
)
# Formats people keep photos in that Pillow cannot read here: named in the message, so the fix is obvious.
UNSUPPORTED_SUFFIXES = {".heic": "HEIC", ".heif": "HEIF", ".jxl": "JPEG XL", ".svg": "SVG", ".cr2": "Camera RAW",
                        ".cr3": "Camera RAW", ".nef": "Camera RAW", ".arw": "Camera RAW", ".dng": "Camera RAW",
                        ".orf": "Camera RAW", ".rw2": "Camera RAW", ".raf": "Camera RAW"}
MAX_FILE_BYTES = 1 << 30  # no photo is larger; a bigger "image" is a mistake or an attack
MAX_ASPECT = 16  # longer side / shorter side kept; a model sees a square-ish centre crop anyway


class ImageReadError(UserFacingError):
    """A file that could not be turned into an image; the message is meant for the user."""

    def __init__(self, path: str | os.PathLike, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


def max_pixels() -> int:
    """The pixel count above which an image is refused: PIL's decompression-bomb limit (its default when unset)."""
    return Image.MAX_IMAGE_PIXELS or 89_478_485


def check_pixels(path, width: int, height: int) -> None:
    """Refuse an image whose header declares more than `max_pixels()` pixels, before it is decoded."""
    if width * height > max_pixels():
        raise ImageReadError(path, f"image too large to open safely ({width}×{height} = {width * height:,} pixels; "
                                   f"the limit is {max_pixels():,})")


def check_file(path: str | os.PathLike) -> os.stat_result:
    """The stat of `path` if it is a regular file a reader may open, else ImageReadError saying what it is: a
    dangling link, a link loop, a folder, a FIFO or device (also behind a link), an unsupported format, empty, or
    larger than MAX_FILE_BYTES."""
    p = str(path)
    try:
        st = os.stat(p)  # follows links; a FIFO is not opened, so nothing blocks
    except FileNotFoundError:
        if os.path.islink(p):
            raise ImageReadError(p, f"dangling symbolic link (its target {os.readlink(p)} does not exist)") from None
        raise ImageReadError(p, "file not found") from None
    except PermissionError:
        raise ImageReadError(p, "permission denied (file is not readable)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ImageReadError(p, "symbolic link loop (the link leads back to itself)") from None
        raise ImageReadError(p, f"cannot be read ({exc.strerror or exc})") from None
    via = ", through a symbolic link" if os.path.islink(p) else ""
    if stat.S_ISDIR(st.st_mode):
        if via and links_to_ancestor(p):
            raise ImageReadError(p, "symbolic link loop (a link to a folder that contains it)")
        named = " (a folder named like an image is not searched)" if _reported_folder(Path(p)) else ""
        raise ImageReadError(p, f"is a folder, not an image file{via}{named}")
    if not stat.S_ISREG(st.st_mode):
        raise ImageReadError(p, f"not a regular file ({special_kind(st.st_mode)}{via})")
    if not os.access(p, os.R_OK):
        raise ImageReadError(p, "permission denied (file is not readable)")
    fmt = UNSUPPORTED_SUFFIXES.get(os.path.splitext(p)[1].lower())
    if fmt and not _readable_content(p):  # decided by content: a JPEG named .heic (a phone's export) is a JPEG
        raise ImageReadError(p, f"{fmt} is not supported; convert to JPEG/PNG")
    if st.st_size == 0:
        raise ImageReadError(p, "file is empty (0 bytes)")
    if st.st_size > MAX_FILE_BYTES:
        raise ImageReadError(p, f"file too large ({st.st_size / 2**30:.1f} GiB; the limit is "
                                f"{MAX_FILE_BYTES / 2**30:.0f} GiB)")
    return st


# the first bytes of the formats Pillow reads here (WebP: RIFF....WEBP)
_READABLE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM", b"II*\x00", b"MM\x00*")


def _readable_content(path: str) -> bool:
    try:
        with open(path, "rb") as fh:  # a regular file (checked above): the open cannot block
            head = fh.read(12)
    except OSError:
        return False
    return head.startswith(_READABLE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")


def links_to_ancestor(path: str) -> bool:
    target = os.path.realpath(path)
    here = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    return here == target or here.startswith(target.rstrip(os.sep) + os.sep)


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """A binary file object on `path`, which `check_file` accepted and which is still a regular file once open
    (O_NONBLOCK: a FIFO swapped in between the two never blocks the open)."""
    check_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except PermissionError:
        raise ImageReadError(path, "permission denied (file is not readable)") from None
    except OSError as exc:
        raise ImageReadError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ImageReadError(path, "not a regular file (it changed while being opened)")
    return os.fdopen(fd, "rb")


def read_file_bytes(path: str | os.PathLike) -> bytes:
    """A regular file's bytes, at most MAX_FILE_BYTES (ImageReadError otherwise)."""
    with open_regular(path) as f:
        try:
            chunks = [f.read(os.fstat(f.fileno()).st_size)]  # the size it has; more only if it grew meanwhile
            total = len(chunks[0])
            while total <= MAX_FILE_BYTES and (more := f.read(min(1 << 20, MAX_FILE_BYTES + 1 - total))):
                chunks.append(more)
                total += len(more)
        except OSError as exc:
            raise ImageReadError(path, f"cannot be read ({exc.strerror or exc})") from None
        except MemoryError:
            raise ImageReadError(path, "not enough memory to read this file") from None
    if total > MAX_FILE_BYTES:
        raise ImageReadError(path, f"file too large (over {MAX_FILE_BYTES / 2**30:.0f} GiB)")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_image(path: str | os.PathLike) -> Image.Image:
    """Open `path` as an upright 8-bit RGB image, or raise ImageReadError saying why not."""
    p = Path(path)
    try:
        # Pillow only warns between MAX_IMAGE_PIXELS and twice that; we refuse at the limit itself,
        # because a model resizes to a few hundred pixels anyway and decoding a bomb exhausts memory.
        with open_regular(p) as f, warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(f) as img:  # reads the header only
                check_pixels(p, *img.size)
                img.seek(0)  # animated GIF/WebP/APNG/TIFF: the first frame
                img.load()
                return cut_extreme_aspect(to_rgb(img))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageReadError(p, f"image too large to open safely ({exc})") from None
    except UnidentifiedImageError:
        raise ImageReadError(p, "not an image file (unrecognised format)") from None
    except PermissionError:
        raise ImageReadError(p, "permission denied (file is not readable)") from None
    except MemoryError:
        raise ImageReadError(p, "not enough memory to decode this image") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        # Pillow reports truncated or corrupt data as OSError/SyntaxError with its own wording.
        raise ImageReadError(p, f"corrupt or truncated image ({exc})") from None


def image_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) from the header alone, with every check `read_image` makes before decoding."""
    p = Path(path)
    try:
        with open_regular(p) as f, warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(f) as img:
                check_pixels(p, *img.size)
                return img.size
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageReadError(p, f"image too large to open safely ({exc})") from None
    except UnidentifiedImageError:
        raise ImageReadError(p, "not an image file (unrecognised format)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise ImageReadError(p, f"corrupt or truncated image ({exc})") from None


def aspect_box(width: int, height: int) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) of the centre that keeps the long side at most MAX_ASPECT × the short one, or
    None when the image is within that. Resizing a 1×60000 strip's short side to a model's 256 px would make a
    256×15,360,000 image (gigabytes); a model's centre crop sees only the middle of it anyway."""
    short = min(width, height)
    if max(width, height) <= MAX_ASPECT * short:
        return None
    keep = MAX_ASPECT * short
    if width > height:
        left = (width - keep) // 2
        return left, 0, left + keep, height
    top = (height - keep) // 2
    return 0, top, width, top + keep


def cut_extreme_aspect(img: Image.Image) -> Image.Image:
    box = aspect_box(*img.size)
    return img if box is None else img.crop(box)


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


def expand_paths(paths: Iterable[str | os.PathLike], recursive: bool = True,
                 ignored: list[tuple[str, str]] | None = None) -> Iterator[Path]:
    """Yield files: folders expand to the image files inside (sorted), files are passed through as given.

    Files given explicitly are yielded whatever their suffix, so a wrongly named file still gets a clear per-file
    message instead of vanishing silently. Inside folders, besides the image files, every entry that cannot be used
    but is not plainly some other kind of file is yielded too, so the reader reports why (see `_walk`); regular
    files of other types (notes.txt, labels.csv) are appended to `ignored` as (path, reason) when it is given.
    """
    return map(Path, expand_path_names(paths, recursive, ignored))


def expand_path_names(paths: Iterable[str | os.PathLike], recursive: bool = True,
                      ignored: list[tuple[str, str]] | None = None) -> Iterator[str]:
    """`expand_paths` as strings: no Path object per file (100k of them cost ~0.3 s on opening a folder)."""
    for path in paths:
        p = Path(path)
        if p.is_dir() and not _reported_folder(p):
            yield from _walk(str(p), recursive, {_dir_key(p)}, ignored)
        else:
            yield str(p)  # expanding twice yields the same: a reported folder stays one entry


def _reported_folder(path: Path) -> bool:
    """A folder named like an image (x.jpg/) or a link back up the tree: reported by the reader, not searched."""
    suffix = path.suffix.lower()
    return (suffix in IMAGE_SUFFIXES or suffix in UNSUPPORTED_SUFFIXES
            or (path.is_symlink() and links_to_ancestor(str(path))))


def _dir_key(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _suffix(name: str) -> str:
    """pathlib's `suffix` of a file name, lowercased (without building a Path)."""
    i = name.rfind(".")
    return name[i:].lower() if 0 < i < len(name) - 1 else ""


def _walk(folder: str, recursive: bool, seen: set, ignored: list | None) -> Iterator[str]:
    """Entries of `folder` in name order, descending into subfolders (links to folders too, each folder once).

    Yielded: regular files with an image or a known-unsupported suffix; anything else named like an image (a
    folder or FIFO called x.jpg; such a folder is not searched); links that dangle or loop; FIFOs, devices and
    sockets whatever their name. A file's type comes from the folder listing (no stat per plain file; links are
    followed)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        if ignored is not None:
            ignored.append((folder, f"folder cannot be read ({exc.strerror or exc})"))
        return
    for entry in entries:
        suffix = _suffix(entry.name)
        image_like = suffix in IMAGE_SUFFIXES or suffix in UNSUPPORTED_SUFFIXES
        try:
            regular = entry.is_file()  # a dangling link: neither a file nor a folder; a loop raises
            st = None if regular or not entry.is_dir() else os.stat(entry.path)
        except OSError:  # a link loop, vanished: the reader says which
            yield entry.path
            continue
        if st is not None:
            key = (st.st_dev, st.st_ino)
            if _reported_folder(Path(entry.path)):
                yield entry.path
            elif recursive and key not in seen:
                seen.add(key)
                yield from _walk(entry.path, recursive, seen, ignored)
        elif not regular or image_like:
            yield entry.path
        elif ignored is not None:
            ignored.append((entry.path, f"not an image file ({suffix or 'no extension'})"))


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
