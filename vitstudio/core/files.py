"""General file helpers, the lowest floor: atomic writes (a reader or a crash sees the old file or the new one,
never half of one), the fault points the kill tests use to stop a process at a chosen instant, where the app keeps
its files.

Where ViT Studio keeps its files: the platform's folders (platformdirs), each with an environment override.

- data (`VITSTUDIO_DATA_DIR`, else the user data folder: `~/.local/share/vitstudio`, `%LOCALAPPDATA%\\vitstudio`,
  `~/Library/Application Support/vitstudio`): settings, crash log, undo journals and label-review exclusions.
- models (`VITSTUDIO_MODELS_DIR`, else `models/` in the data folder): the user's models and fine-tuning runs. Never
  beside the package, which is read-only in a pip install; the bundled demo's folder (a source checkout's `models/`,
  or share/vitstudio/models where a wheel installed it) is listed too (`extra_model_dirs`), read-only.
- cache (`VITSTUDIO_CACHE_DIR`, else the user cache folder, which honours `XDG_CACHE_HOME`): decoded images,
  embeddings, fingerprints. Anything there may be deleted at any time.

Journals and exclusions of a dataset are keyed by the dataset's resolved path, so the user's folder is never written
to for the app's own bookkeeping.

Reading what a user or the app wrote (bounded, regular files only) and the app's JSON records: `core/records.py`.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path

import platformdirs

try:
    import fcntl
except ImportError:  # Windows: no flock; a temp is then judged by its age alone
    fcntl = None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, flush to disk, then rename over `path`: a reader (or a
    crash) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    if fcntl is not None:  # held until the file closes: `remove_stale_temps` never takes a temp being written
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are ordinary files
        die_at(f"before-rename-{path.name}")
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise naming(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


STALE_TEMP_S = 60  # a temp written to this long ago, and closed, is no atomic write's: those rename at once


def remove_stale_temps(path: Path) -> list[str]:
    """Remove what atomic writes of `path` left when they were killed: `.NAME.XXXXXXXX.tmp` (mkstemp's eight
    characters) beside it, each a regular file no writer holds (an atomic write locks its temp until it closes it)
    and last written over a minute ago. Nothing else in the folder is touched. Returns the names removed."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    try:
        entries = [e for e in os.scandir(path.parent) if pattern.fullmatch(e.name)]
    except OSError:
        return []
    removed = []
    for entry in entries:
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and time.time() - st.st_mtime > STALE_TEMP_S and not held(entry.path):
                os.unlink(entry.path)
                removed.append(entry.name)
    return removed


def held(path: str | os.PathLike) -> bool:
    """True while some process holds an flock on the file (never where there is no flock: Windows)."""
    if fcntl is None:
        return False
    with open(path, "rb") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
    return False


def naming(exc: OSError, path: Path | str) -> OSError:
    """`exc` with the file it was about: a write that fails on a full disk says only "[Errno 28] No space left on
    device", not which file (the messages that reach the user name it)."""
    if exc.filename is not None:
        return exc
    return type(exc)(exc.errno, exc.strerror or str(exc), str(path))


# A text cell that starts with one of these is run as a formula by a spreadsheet opening the CSV (OWASP's CSV
# injection rule): a file or class named "=HYPERLINK(…)" must stay a name.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


_SPECIAL_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def stat_keys(path: str | Path) -> tuple[str, str] | None:
    """(size:mtime, inode:ctime) of a regular file (the first is what a user sees, the second changes with every
    write); None for anything else (missing, a FIFO, a device, a folder: never opened here, a FIFO would block)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return f"{st.st_size}:{st.st_mtime_ns}", f"{st.st_ino}:{st.st_ctime_ns}"


def special_kind(mode: int) -> str:
    """What a stat mode that is no regular file is, in words."""
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), "a special file")


def not_regular(path: str | os.PathLike) -> str | None:
    """What stands at `path` when something does but it is no regular file a reader may open ("a character device,
    through a symbolic link to /dev/zero", "a dangling symbolic link"); None for a regular file or for nothing there.
    A device or a FIFO is never opened: reading /dev/zero as a config or weights file would never end."""
    p = os.fspath(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        return f"a dangling symbolic link to {os.readlink(p)}" if os.path.islink(p) else None
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    via = f", through a symbolic link to {os.readlink(p)}" if os.path.islink(p) else ""
    return special_kind(mode) + via


def no_folder_above(path: str | os.PathLike) -> str | None:
    """What stops a folder being made at `path` ("/x/afile is a file, not a folder"): the nearest path above it
    that exists, when that is no folder; None when it is one (or nothing above exists)."""
    for above in Path(os.path.abspath(path)).parents:
        if os.path.lexists(above):
            if os.path.isdir(above):
                return None
            what = "a file" if os.path.isfile(above) else not_regular(above) or "no folder"
            return f"{shown_path(above)} is {what}, not a folder"
    return None


def irregular(path: str | os.PathLike, role: str) -> str | None:
    """"PATH is not a regular file (a character device, …); ROLE must be one." when `not_regular` finds something
    else there, else None: the one wording for configs and weights refused before they are read."""
    what = not_regular(path)
    return None if what is None else f"{path} is not a regular file ({what}); {role} must be one."


def spreadsheet_safe(cell):
    """`cell`, with an apostrophe before a text that a spreadsheet would run as a formula (shown as text there,
    taken off again by `from_spreadsheet`); numbers and other texts as they are."""
    return "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_START) else cell


def from_spreadsheet(cell: str) -> str:
    """A cell as written before `spreadsheet_safe` (for the CSVs the app reads back: labels files)."""
    return cell[1:] if cell.startswith("'") and cell[1:2] in FORMULA_START else cell


_CONTROL_NAMES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'1 image', '3 images'; '1 class', '2 classes' with `plural` (the app said "1 images the model doubts"). Every
    count the app and the command line print goes through it."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def shown_path(path: str | os.PathLike) -> str:
    """A file or class name as people are shown it (terminal lines, reports): one line, whatever it holds. Control
    characters are written as escapes (\\n, \\t, \\x1b; the C1 controls as \\u009b), the characters that reorder
    or break the text around them (bidirectional overrides and isolates, U+2028/2029) as \\u202e, and bytes that are
    not UTF-8 (surrogate escapes) as \\xNN, so a name never breaks a report's line, moves the terminal's cursor,
    reverses the words after it or fails to print; everything else as it is."""
    return _UNSHOWN.sub(_escaped, os.fspath(path))


# C0 and C1 controls, DEL, the bidirectional marks, embeddings, overrides and isolates, line and paragraph
# separators (Unicode's Bidi_Control and Zl/Zp), and surrogate escapes of bytes that are not UTF-8
_UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\udc80-\udcff]")


def _escaped(match: re.Match) -> str:
    ch = match.group()
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode keeps it
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x20 or code == 0x7F:
        return _CONTROL_NAMES.get(ch, f"\\x{code:02x}")
    return f"\\u{code:04x}"


def open_csv(path: str | os.PathLike):
    """A CSV file for writing. A file name that is not UTF-8 (held by Python as surrogate escapes) is written as its
    own bytes, so its row is written whole and names the file on disk (the strict codec stopped mid-file)."""
    return open(path, "w", newline="", encoding="utf-8", errors="surrogateescape")


class SafeCsvWriter:
    """The one CSV writer of the app: `csv.writer` whose cells go through `spreadsheet_safe`."""

    def __init__(self, file, **options) -> None:
        self._writer = csv.writer(file, **options)

    def writerow(self, row) -> None:
        self._writer.writerow([spreadsheet_safe(cell) for cell in row])

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def atomic_torch_save(obj, path: Path) -> None:
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


@contextlib.contextmanager
def deferred_interrupt():
    """Ctrl+C inside the block is held until the block ends (then raised): an epoch's metrics row, its checkpoint
    and the count of finished epochs are written together or not at all. Only in the main thread (where Python
    delivers SIGINT); elsewhere the block just runs."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda *_: received.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:  # delivered now, to the handler the block held it from (it may raise, or ignore a second one)
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt


def die_at(point: str) -> None:
    """Fault injection for the kill tests: `VITSTUDIO_DIE_AT=point[:n]` SIGKILLs this process the n-th time
    (default 1st) it passes `point`; `VITSTUDIO_INTERRUPT_AT=point[:n][,point[:n]…]` sends it SIGINT (a Ctrl+C)
    there instead, once per entry; `VITSTUDIO_FULL_AT=point[:n]` raises there the OSError a write raises on a full
    disk (errno 28, no file name, as the kernel reports it). Off unless one of these variables is set."""
    if not (os.environ.get("VITSTUDIO_DIE_AT") or os.environ.get("VITSTUDIO_INTERRUPT_AT")
            or os.environ.get("VITSTUDIO_FULL_AT")):
        return
    import errno
    import signal

    _passes[point] = _passes.get(point, 0) + 1
    for variable, sig in (("VITSTUDIO_DIE_AT", signal.SIGKILL), ("VITSTUDIO_INTERRUPT_AT", signal.SIGINT),
                          ("VITSTUDIO_FULL_AT", None)):
        for wanted in filter(None, os.environ.get(variable, "").split(",")):
            name, _, count = wanted.partition(":")
            if name == point and _passes[point] == int(count or 1):
                if sig is None:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.kill(os.getpid(), sig)


_passes: dict[str, int] = {}


# -- where the app keeps its files -------------------------------------------------------------------------------------
APP = "vitstudio"
DATA_ENV, MODELS_ENV, CACHE_ENV = "VITSTUDIO_DATA_DIR", "VITSTUDIO_MODELS_DIR", "VITSTUDIO_CACHE_DIR"
CHECKOUT_ROOT = Path(__file__).resolve().parents[2]  # the folder holding `vitstudio/` (a checkout or site-packages)


def data_dir() -> Path:
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else platformdirs.user_data_path(APP, appauthor=False)


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else platformdirs.user_cache_path(APP, appauthor=False)


def models_dir() -> Path:
    """Where new runs and the user's models go (and are listed from)."""
    env = os.environ.get(MODELS_ENV)
    return Path(env) if env else data_dir() / "models"


def app_folders() -> list[tuple[str, Path, str]]:
    """(what, where, what moves it) for each of the app's three folders, as `vitstudio card` and Help → About show
    them: VITSTUDIO_DATA_DIR moves the models folder too unless that has its own variable, never the caches."""
    models = f"{MODELS_ENV}; else models/ in the data folder"
    cache = f"{CACHE_ENV}; else the user cache folder, not moved by {DATA_ENV}"
    return [("Models folder", models_dir(), models), ("Data folder", data_dir(), DATA_ENV),
            ("Cache folder", cache_dir(), cache)]


def checkout_models_dir() -> Path | None:
    """`models/` of a source checkout (the bundled demo, runs made before models moved to the data folder):
    listed, never written to. None in a pip install (no pyproject.toml beside the package)."""
    folder = CHECKOUT_ROOT / "models"
    return folder if (CHECKOUT_ROOT / "pyproject.toml").is_file() and folder.is_dir() else None


def installed_shares(package_root: Path | None = None, prefix: Path | None = None) -> list[Path]:
    """Where a wheel put its data files (pyproject's data-files: the demo model, the sample images): share/vitstudio
    under the environment's prefix (sys.prefix), or under the prefix holding the package (`pip install --user` or
    `--prefix`: <prefix>/lib/pythonX.Y/site-packages, <prefix>/Lib/site-packages on Windows). Existing ones only."""
    above = (package_root or CHECKOUT_ROOT).parents  # the package's site-packages, then its parents
    prefixes = (prefix or Path(sys.prefix), *tuple(above)[1:3])
    shares = (folder / "share" / APP for folder in prefixes)
    return [share for share in dict.fromkeys(shares) if share.is_dir()]


def bundled_models_dir(package_root: Path | None = None, prefix: Path | None = None) -> Path | None:
    """The folder of the models shipped with ViT Studio (the digits demo): a source checkout's `models/`, else the
    installed wheel's share/vitstudio/models; None when neither is there."""
    root = package_root or CHECKOUT_ROOT
    if (root / "pyproject.toml").is_file() and (root / "models").is_dir():
        return root / "models"
    return next((share / "models" for share in installed_shares(root, prefix) if (share / "models").is_dir()), None)


def extra_model_dirs() -> list[Path]:
    """Read-only model folders listed after `models_dir()`: the bundled models' folder when it is another folder,
    so the demo is listed and found by its name (`--model digits-vit`) from a checkout and an install alike."""
    folder = bundled_models_dir()
    if folder is None or _same(folder, models_dir()):
        return []
    return [folder]


def dataset_key(folder: str | Path) -> str:
    """A folder name for a dataset's bookkeeping: its base name (for people browsing the data folder) and a hash
    of its resolved path (two datasets called `train` stay apart; a symlinked path finds the same records)."""
    resolved = str(Path(folder).expanduser().resolve())
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(resolved).name)[:40] or "root"
    return f"{name}-{hashlib.sha1(os.fsencode(resolved)).hexdigest()[:12]}"


def dataset_dir(folder: str | Path) -> Path:
    """The app's records of one dataset folder (sort/move journals, exclusions), in the data folder."""
    return data_dir() / "datasets" / dataset_key(folder)


def journals_dir(folder: str | Path) -> Path:
    """Undo journals of the sorts into `folder` and the label-review moves inside it."""
    return dataset_dir(folder) / "journals"


def settings_path() -> Path:
    return data_dir() / "settings.json"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
