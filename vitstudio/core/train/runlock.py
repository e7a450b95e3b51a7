"""One process at a time owns a run folder, and a run can be picked up after anything happened to it.

The owner holds an exclusive `flock` on `RUN/.lock` for the whole run: a second start or resume fails at once with
a clear message, and a killed process (even by SIGKILL) releases it, so a lock is never stale. A run whose
status.json still says "running" while nobody holds the lock was killed: it resumes from its last checkpoint, or
starts over when no epoch finished.
"""

from __future__ import annotations

import os
from pathlib import Path

from vitstudio.core.errors import UserFacingError
from vitstudio.core.files import held

try:
    import fcntl
except ImportError:  # Windows: no flock; runs are then not protected against a second process
    fcntl = None

LOCK = ".lock"


class RunFileError(ValueError, UserFacingError):
    """A file of a run folder that cannot be used as it is; the message (one line) names it and says what is
    wrong."""


class RunInUse(UserFacingError):
    """Another process is training this run right now."""


class RunLock:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.fh = None

    def acquire(self) -> RunLock:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / LOCK
        try:
            fh = open(path, "a+")  # noqa: SIM115  (held open for the run's lifetime)
        except OSError as exc:  # e.g. a directory by that name
            what = "a directory" if path.is_dir() else (exc.strerror or str(exc))
            raise RunFileError(f"{path} is not a lock file ({what}); remove it (no ViT Studio process uses it) "
                               f"and try again") from None
        if fcntl is not None:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.seek(0)
                owner = fh.read().strip() or "another process"
                fh.close()
                raise RunInUse(f"{self.folder.name} is being trained right now by {owner}; wait for it, or "
                               f"cancel it there.") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        self.fh = fh
        return self

    def release(self) -> None:
        if self.fh is not None:
            self.fh.close()  # closing releases the flock
            self.fh = None


def is_owned(folder: Path) -> bool:
    """True while some process holds the run's lock."""
    path = Path(folder) / LOCK
    return path.is_file() and held(path)


def remove_stale_files(folder: Path) -> list[str]:
    """Temp files of interrupted atomic writes and staging folders of interrupted model saves; a folder swapped out
    (`.old-NAME-*/NAME`, core/train/adapters.py) goes back in place when the swap was cut before the new one arrived."""
    import shutil

    removed = []
    for path in Path(folder).iterdir():
        if path.name.startswith(".old-") and path.is_dir():
            for kept in path.iterdir():
                if not (Path(folder) / kept.name).exists():
                    os.replace(kept, Path(folder) / kept.name)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
        elif path.name.startswith(".") and (path.name.endswith(".tmp") or path.name.startswith(".staging-")):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed
