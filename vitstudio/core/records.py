"""What a user or the app wrote, read safely and kept atomically: only a regular file, bounded in size, is ever
read (`read_regular_file`: a FIFO is never opened, a link to /dev/zero never read); the app's own JSON records (tags,
views, settings, exclusions) read whole or set aside.

What the app remembers (`SettingsStore`): one JSON file in the data folder (the Training form, the dataset, the
Folder tab's folder and filters); per dataset, the label review's exclusions (`core/folder/exclusions.py`). Every
change is written at once and atomically: a crash leaves the previous file or the new one, and a second window
started later reads what the first wrote. A file that cannot be read (edited by hand, from a future version) is set
aside as `.bad` (`.bad.2`, … after it: none overwritten), said in one warning on the `vitstudio.records` logger (the
command line writes it on stderr), and the app starts from defaults rather than refusing to start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from pathlib import Path

from .files import atomic_write_bytes, not_regular, settings_path, shown_path, special_kind


# -- reading what a user or the app wrote -----------------------------------------------------------------------------
class UnreadableFile(ValueError):
    """A file refused before (or while) it is read: not a regular file, or larger than any file of its kind. The
    message is one line naming it."""


def read_regular_file(path: str | os.PathLike, limit: int, role: str = "it", noun: str = "file") -> bytes:
    """The bytes of the regular file at `path`, or UnreadableFile in one line: something else stands there (a FIFO
    is never opened for reading, a link to /dev/zero or /dev/urandom never read: `not_regular`), or it holds more
    than `limit` bytes (checked on the open file, and at most `limit` + 1 bytes are ever read, so a file that grows
    meanwhile is refused too). `role` says what must be a regular file, `noun` what the file is. A missing file
    raises FileNotFoundError; another failing open or read, its OSError."""
    p = os.fspath(path)
    what = not_regular(p)
    if what is not None:
        raise UnreadableFile(f"{shown_path(p)} is not a regular file ({what}); {role} must be one.")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped for something else between the stat and the open
            raise UnreadableFile(f"{shown_path(p)} is not a regular file ({special_kind(st.st_mode)}); {role} must "
                                 f"be one.")
        data = f.read(limit + 1) if st.st_size <= limit else b""
        size = max(st.st_size, len(data))
    if size > limit:
        raise UnreadableFile(f"{shown_path(p)} is {size / 2**20:.1f} MB, larger than any {noun} (the limit is "
                             f"{limit / 2**20:g} MB).")
    return data


# -- what the app remembers --------------------------------------------------------------------------------------------
RECORD_LIMIT = 64 << 20  # a record the app wrote: tags of ~400,000 images; views.json of ~400,000 views
records_log = logging.getLogger("vitstudio.records")  # a record set aside: the command line prints it on stderr


def read_json_file(path: Path, limit: int | None = None) -> dict:
    """A JSON object file the app wrote; {} when missing, and when it cannot be one (not a regular file, over
    `limit` bytes (RECORD_LIMIT), not UTF-8 JSON, not an object): then it is set aside as `.bad` (numbered: none
    overwritten), not lost, and a warning says so."""
    try:
        value = json.loads(read_regular_file(path, limit or RECORD_LIMIT, "a record of the app", "record of the app"))
    except FileNotFoundError:
        return {}
    except UnreadableFile as exc:
        set_aside(path, str(exc).rstrip("."))
        return {}
    except OSError as exc:
        set_aside(path, f"{shown_path(path)} cannot be read ({exc.strerror or exc})")
        return {}
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested past the parser
        set_aside(path, f"{shown_path(path)} is not JSON ({' '.join(str(exc).split())[:120] or 'too deep'})")
        return {}
    if not isinstance(value, dict):
        set_aside(path, f"{shown_path(path)} holds a JSON {type(value).__name__}, not an object")
        return {}
    return value


def read_json_value(path: str | os.PathLike, role: str, noun: str, limit: int = 8 << 20):
    """A small JSON file parsed, or one ValueError line naming it: not a regular file (a link to /dev/zero is never
    read), over `limit` bytes, not UTF-8, nested too deeply for the parser (a RecursionError), not JSON. `role`
    says what must be a regular file ("a model folder's config"), `noun` what the file is ("model config")."""
    try:
        text = read_regular_file(path, limit, role, noun).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} cannot be read as UTF-8 text: {exc}") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply to be a {noun}.") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def set_aside(path: Path, why: str) -> Path | None:
    """Rename a record that cannot be read to the first free `NAME.bad`, `NAME.bad.2`, … (a second damaged record
    never overwrites the first one set aside) and say so in one warning ("WHY; set aside as …"); the path it went
    to, None when it could not be moved (the next write replaces it)."""
    path = Path(path)
    for n in range(1, 10_000):
        target = path.with_name(path.name + (".bad" if n == 1 else f".bad.{n}"))
        try:
            os.link(path, target, follow_symlinks=False)  # fails on a name taken: nothing is overwritten
        except FileExistsError:
            continue
        except OSError:  # no hard links here (some file systems): a rename, after checking the name is free
            if os.path.lexists(target):
                continue
            try:
                os.replace(path, target)
            except OSError:
                break
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
        records_log.warning("%s; set aside as %s, and started afresh", why, shown_path(target.name))
        return target
    records_log.warning("%s; it could not be set aside and is left as it is", why)
    return None


def write_json_file(path: Path, value: dict) -> None:
    atomic_write_bytes(path, json.dumps(value, indent=1, sort_keys=True).encode("utf-8"))


class SettingsStore:
    """Named JSON values; `set` writes the file at once. Values are plain JSON (str, numbers, lists, dicts)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else settings_path()
        self._values = read_json_file(self.path)

    def get(self, key: str, default=None):
        return self._values.get(key, default)

    def set(self, key: str, value) -> None:
        if self._values.get(key) == value:
            return
        self._values[key] = value
        write_json_file(self.path, self._values)

    def remove(self, key: str) -> None:
        if self._values.pop(key, None) is not None:
            write_json_file(self.path, self._values)
