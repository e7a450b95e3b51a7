"""Where a command writes: never onto what it reads, never a folder mixed from two runs.

The rule for inputs: an output (a folder or a file) is never one of the command's inputs, never inside an input
folder, and never a folder that holds one (replacing it whole would take them with it).

An output folder (`segment --out`, `teach --export`, the Paint page's and the Teach tab's exports) is built beside
its place (`.NAME.partial-XXXXXXXX` in the same parent) and swapped in whole once finished: one rename(2) with
RENAME_EXCHANGE where the system has it, else two renames (a kill between them leaves no folder at NAME and the
earlier output beside it, never a mix). A reader, a kill or a second run therefore sees the earlier output or the new
one. Its manifest (`.vitstudio-output.json`, written last) names the command, the run and every file it wrote; an
existing folder is replaced only when it is empty or such an output of the same command with nothing added since,
never a folder of the user's files. Two runs into one folder at once: the second is refused while the first holds
the folder's lock (`.NAME.lock` beside it, flock'd, removed when the run ends).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vitstudio.core.errors import UserFacingError
from vitstudio.core.files import atomic_write_bytes, die_at, naming, no_folder_above, shown_path
from vitstudio.core.records import read_json_value

try:
    import fcntl
except ImportError:  # Windows: no flock; two runs at once are then not told apart
    fcntl = None

MANIFEST = ".vitstudio-output.json"
MAX_MANIFEST_BYTES = 64 << 20


class OutputRefused(UserFacingError, ValueError):
    """An output that would land on an input, on files ViT Studio did not write, or on a folder another run is
    writing now."""


@dataclass(frozen=True)
class Input:
    """Something a command reads, as the refusals name it ("the painted masks' folder")."""

    what: str
    path: str | os.PathLike
    output_may_be_inside: bool = False  # e.g. segment --out-inside: the output is then skipped as an input
    output_may_hold: bool = False  # e.g. the painted masks of an earlier export, carried into the new output


def _resolved(path: str | os.PathLike) -> Path:
    return Path(os.path.abspath(os.path.expanduser(path))).resolve()


def refuse_onto_inputs(target: str | os.PathLike, inputs: Sequence[Input], option: str) -> None:
    """OutputRefused when `target` is an input, lies inside an input folder, or holds an input."""
    t = _resolved(target)
    for given in inputs:
        p = _resolved(given.path)
        where = f"{option} {shown_path(target)}"
        if t == p:
            raise OutputRefused(f"{where} is {given.what}: ViT Studio never writes onto what it reads; choose "
                                f"another {'folder' if p.is_dir() else 'file'}")
        if p in t.parents and not given.output_may_be_inside:
            raise OutputRefused(f"{where} is inside {given.what} ({shown_path(given.path)}): ViT Studio never writes "
                                f"into what it reads; choose a place outside it")
        if t in p.parents and not given.output_may_hold:
            raise OutputRefused(f"{where} holds {given.what} ({shown_path(given.path)}): the output would replace "
                                f"it; choose a place that does not hold it")


def refuse_file_onto_inputs(target: str | os.PathLike, inputs: Sequence[str | os.PathLike], option: str) -> None:
    """OutputRefused when the file `target` is one of the files given to read, or an image inside a folder given
    (it would be read as one of its images): a report or a map is never written over the image it is about."""
    from vitstudio.core.data.images import IMAGE_SUFFIXES

    t = _resolved(target)
    for given in inputs:
        p = _resolved(given)
        if t == p:
            raise OutputRefused(f"{option} {shown_path(target)} is one of the images given to read: ViT Studio never "
                                f"writes onto what it reads; choose another file")
        if p in t.parents and t.suffix.lower() in IMAGE_SUFFIXES:
            raise OutputRefused(f"{option} {shown_path(target)} is an image of {shown_path(given)}, which is given "
                                f"to read: ViT Studio never writes onto what it reads; choose another file")


def check_output_folder(out: str | os.PathLike, command: str, option: str, inputs: Sequence[Input] = ()) -> Path:
    """The output folder (a symbolic link's folder where it names one: the link itself stays), once it is neither a
    file, nor on an input, nor a folder it may not replace (one that holds anything but an earlier output of
    `command`): each refused in one line, before any work."""
    out = Path(out)
    if out.is_symlink() and out.is_dir():
        out = out.resolve()
    if os.path.lexists(out) and not out.is_dir():
        what = "a symbolic link to no folder" if out.is_symlink() else "a file"
        raise OutputRefused(f"{option} {shown_path(out)} is {what}, not a folder: give a folder for the output")
    blocked = no_folder_above(out)
    if blocked:
        raise OutputRefused(f"{option} {shown_path(out)} cannot be made: {blocked}")
    refuse_onto_inputs(out, inputs, option)
    if out.is_dir():
        _check_replaceable(out, command, option)
    return out


def _present(out: Path) -> set[str]:
    """Every file and folder under `out` (links not followed), as posix paths relative to it."""
    found = set()
    for root, dirs, names in os.walk(out):
        rel = Path(root).relative_to(out)
        found.update((rel / name).as_posix() for name in [*dirs, *names])
    found.discard(MANIFEST)
    return found


def read_manifest(out: Path) -> dict | None:
    """The manifest of an output folder, None where there is none; a damaged one is a ValueError line."""
    path = out / MANIFEST
    if not os.path.lexists(path):
        return None
    value = read_json_value(path, "an output folder's manifest", "output manifest", MAX_MANIFEST_BYTES)
    files = value.get("files") if isinstance(value, dict) else None
    if not (isinstance(files, list) and all(isinstance(f, str) for f in files)
            and isinstance(value.get("command"), str)):
        raise ValueError(f"{shown_path(path)} is not an output manifest ViT Studio wrote")
    return value


def _check_replaceable(out: Path, command: str, option: str) -> None:
    try:
        manifest = read_manifest(out)
    except ValueError as exc:
        raise OutputRefused(f"{option} {shown_path(out)}: {exc}; choose a new or empty folder") from None
    if manifest is None:
        first = next(iter(sorted(os.listdir(out))), None)  # one level: a home folder given is refused at once
        if first is not None:
            raise OutputRefused(f"{option} {shown_path(out)} holds files ViT Studio did not write (e.g. "
                                f"{shown_path(first)}); an output replaces only an earlier output of its own: "
                                f"choose a new or empty folder")
        return
    present = _present(out)
    if manifest["command"] != command:
        raise OutputRefused(f"{option} {shown_path(out)} is the output of `vitstudio {shown_path(manifest['command'])}`"
                            f", not of `vitstudio {command}`: choose another folder")
    written = set(manifest["files"])
    allowed = written | {p.as_posix() for f in written for p in Path(f).parents if p != Path(".")}
    added = sorted(present - allowed)
    if added:
        more = f" (and {len(added) - 1} more)" if len(added) > 1 else ""
        raise OutputRefused(f"{option} {shown_path(out)} holds {shown_path(added[0])}{more}, which its earlier "
                            f"output did not write: move {'them' if more else 'it'} out or choose another folder")


@dataclass
class Building:
    """An output folder being built: write under `path`; it becomes `final` when the block ends without error and
    without `abandon()` (a cancelled run: the earlier output stays)."""

    path: Path
    final: Path
    abandoned: bool = False

    def abandon(self) -> None:
        self.abandoned = True

    def final_of(self, p: str | os.PathLike) -> Path:
        """Where `p` (under `path`) will be once the folder is swapped in."""
        return self.final / Path(p).relative_to(self.path)


@contextlib.contextmanager
def output_folder(out: str | os.PathLike, command: str, option: str, inputs: Sequence[Input] = ()
                  ) -> Iterator[Building]:
    """Build an output folder beside `out` and swap it in whole when the block ends; an error (or a cancel raised
    through it) leaves the earlier output as it was. The checks of `check_output_folder` run again under the lock."""
    out = check_output_folder(out, command, option, inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out, option):
        check_output_folder(out, command, option, inputs)
        _remove_leftovers(out)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
        try:
            os.chmod(staging, 0o755)  # mkdtemp makes it private; an output is an ordinary folder
            building = Building(staging, out)
            yield building
            if building.abandoned:
                return
            _write_manifest(staging, command)
            die_at("output-swap")
            _swap(staging, out)
        except OSError as exc:
            raise naming(exc, out) from None
        finally:
            _remove(staging)  # after a swap it holds the earlier output, or is gone


def _write_manifest(staging: Path, command: str) -> None:
    files = sorted(p for p in _present(staging) if not (staging / p).is_dir() or (staging / p).is_symlink())
    document = {"format": 1, "command": command, "run": uuid.uuid4().hex, "pid": os.getpid(),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": files}
    atomic_write_bytes(staging / MANIFEST, json.dumps(document, indent=1).encode())


def _swap(staging: Path, out: Path) -> None:
    if not os.path.lexists(out):
        os.rename(staging, out)
    elif not _exchange(staging, out):
        old = staging.with_name(staging.name.replace(".partial-", ".old-", 1))
        os.rename(out, old)
        os.rename(staging, out)
        _remove(old)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux's renameat2 RENAME_EXCHANGE); False where the system cannot."""
    if sys.platform != "linux":
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a C library older than glibc 2.28
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):  # a kernel or file system without the flag
        return False
    raise OSError(code, os.strerror(code), str(b))


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _remove_leftovers(out: Path) -> None:
    """What killed runs into `out` left beside it (their partial and old folders): under the lock, no run is
    building them."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(partial|old)-[a-z0-9_]{{8}}")
    with contextlib.suppress(OSError):
        for entry in os.scandir(out.parent):
            if pattern.fullmatch(entry.name):
                _remove(Path(entry.path))


@contextlib.contextmanager
def _locked(out: Path, option: str) -> Iterator[None]:
    """`.NAME.lock` beside the output, held for the run; refused at once when another run holds it."""
    if fcntl is None:
        yield
        return
    lock = out.parent / f".{out.name}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise naming(exc, lock) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OutputRefused(f"{option} {shown_path(out)} is being written by another run of ViT Studio now: "
                                f"wait for it to end, or choose another folder") from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # its last holder removed it as we opened it: take the file there now
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)  # while still held: a run waiting on this file finds it gone and takes a new one
        os.close(fd)
