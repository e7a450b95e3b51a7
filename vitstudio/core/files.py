"""General file helpers, the lowest floor: atomic writes (a reader or a crash sees the old file or the new one,
never half of one) and the fault points the kill tests use to stop a process at a chosen instant."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, flush to disk, then rename over `path`: a reader (or a
    crash) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; results are ordinary files
        die_at(f"before-rename-{path.name}")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
