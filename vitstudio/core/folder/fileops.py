"""File primitives for sorting and its undo that leave no half-done file under a final name.

A copy is written to a temporary name in the destination folder (`.NAME.N.vitstudio-part`, which no image scan
picks up) and then given its final name by a hard link (atomic, and it fails if the name is taken; `os.replace`
after a check where links are not supported), so a kill at any instant leaves either no file or a whole one at the
target. A move on the same filesystem is a hard link under the new name, then the old name removed (one file
throughout); across filesystems it is a copy as above, then the original is removed — and when the original cannot
be removed (a read-only folder) the copy is taken back, so a failed move never leaves a second file behind.
Nothing here overwrites: a target that exists is an error.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

PART_SUFFIX = ".vitstudio-part"
CHUNK = 1 << 20


def part_name(target: str | Path, tag: int | str) -> Path:
    """The temporary name a copy to `target` is written under (same folder, so the final rename is atomic)."""
    target = Path(target)
    return target.with_name(f".{target.name}.{tag}{PART_SUFFIX}")


def file_hash(path: str | Path) -> tuple[int, str]:
    """(size, sha256 hex) of a file's bytes."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def same_bytes(a: str | Path, b: str | Path) -> bool:
    try:
        if os.path.samefile(a, b):  # two names of one file (a move stopped between link and unlink)
            return True
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        return file_hash(a)[1] == file_hash(b)[1]
    except OSError:
        return False


def remove_quietly(path: str | Path | None) -> bool:
    """Remove a leftover temporary file; True when there was one."""
    if not path:
        return False
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def copy_into_place(source: str | Path, target: str | Path, part: str | Path) -> tuple[int, str]:
    """Copy `source` to `target` through `part`; returns (size, sha256) of what was written. Never overwrites."""
    h, size = hashlib.sha256(), 0
    try:
        with open(source, "rb") as src, open(part, "xb") as dst:
            while chunk := src.read(CHUNK):
                dst.write(chunk)
                h.update(chunk)
                size += len(chunk)
        try:
            os.utime(part, ns=(os.stat(source).st_atime_ns, os.stat(source).st_mtime_ns))
        except OSError:
            pass  # times are a courtesy, not part of the copy
        link_no_replace(part, target)
    except BaseException:
        remove_quietly(part)
        raise
    remove_quietly(part)
    return size, h.hexdigest()


def link_no_replace(existing: str | Path, new: str | Path) -> None:
    """Give `existing` the name `new` unless `new` is taken — atomically where hard links work (a second writer
    cannot slip in between a check and the rename); the old name stays (the caller removes it). Elsewhere (FAT,
    some network shares): a check, then `os.replace`."""
    try:
        os.link(existing, new)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS, errno.EACCES):
            raise
    if os.path.lexists(new):
        raise FileExistsError(errno.EEXIST, "a file is already at the target", str(new))
    os.replace(existing, new)


def move_file(source: str | Path, target: str | Path, part: str | Path) -> None:
    """Move without overwriting. Across filesystems: copy through `part`, then remove the original; if that fails,
    the copy is removed again and the error raised (nothing moved, nothing duplicated)."""
    try:  # same filesystem: a second name, then the first removed (a kill in between leaves one file, two names)
        link_no_replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        copy_into_place(source, target, part)
    try:
        if os.path.lexists(source):  # (os.replace fallback: already gone)
            os.unlink(source)
    except OSError as exc:
        os.unlink(target)
        raise OSError(exc.errno, f"could not remove the original ({exc.strerror}); the copy was taken back, "
                                 "nothing moved", str(source)) from exc


def source_folder_writable(source: str | Path) -> bool:
    """A move must be able to remove the original: its folder must be writable (checked before copying anything)."""
    return os.access(os.path.dirname(os.path.abspath(source)) or ".", os.W_OK)
