"""One process at a time owns a run folder, and a run can be picked up after anything happened to it.

The owner holds an exclusive `flock` on `RUN/.lock` for the whole run: a second start or resume fails at once with
a clear message, and a killed process (even by SIGKILL) releases it, so a lock is never stale. A run whose
status.json still says "running" while nobody holds the lock was killed: it resumes from its last checkpoint, or
starts over when no epoch finished.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; runs are then not protected against a second process
    fcntl = None

LOCK = ".lock"


class RunInUse(Exception):
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
            from vitstudio.core.train.runs import RunFileError

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
    if fcntl is None or not path.is_file():
        return False
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return False


def remove_stale_files(folder: Path) -> list[str]:
    """Temp files of interrupted atomic writes and staging folders of interrupted model saves."""
    import shutil

    removed = []
    for path in Path(folder).iterdir():
        if path.name.startswith(".") and (path.name.endswith(".tmp") or path.name.startswith(".staging-")):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


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
    there instead, once per entry. Off unless one of these variables is set."""
    if not (os.environ.get("VITSTUDIO_DIE_AT") or os.environ.get("VITSTUDIO_INTERRUPT_AT")):
        return
    import signal

    _passes[point] = _passes.get(point, 0) + 1
    for variable, sig in (("VITSTUDIO_DIE_AT", signal.SIGKILL), ("VITSTUDIO_INTERRUPT_AT", signal.SIGINT)):
        for wanted in filter(None, os.environ.get(variable, "").split(",")):
            name, _, count = wanted.partition(":")
            if name == point and _passes[point] == int(count or 1):
                os.kill(os.getpid(), sig)


_passes: dict[str, int] = {}
