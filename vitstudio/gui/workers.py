"""The only module that creates threads. Jobs run on a QThreadPool; results come back as queued signals.

A job is a callable `fn(cancel: CancelToken)` that checks the token between units of work (raising
`Cancelled`, or returning early with what it has). If it returns a generator, every yielded value is
delivered to `on_yield` on the GUI thread and the generator's return value goes to `on_result`. Errors always
reach `on_error` (and the log); `Cancelled` is silent. Late results of a superseded request are dropped by
`LatestJob`.
"""

from __future__ import annotations

import inspect
import logging
import traceback
from collections.abc import Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from vitstudio.core.jobs import Cancelled, CancelToken

log = logging.getLogger("vitstudio.jobs")


class _Signals(QObject):
    yielded = Signal(object)
    result = Signal(object)
    error = Signal(str)
    finished = Signal()


class JobHandle:
    """A running job: cancel it, ask whether it is done, or connect to its signals."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cancel_token = CancelToken()
        self.signals = _Signals()
        self.done = False
        self.signals.finished.connect(self._mark_done)

    def _mark_done(self) -> None:
        self.done = True

    def cancel(self) -> None:
        self.cancel_token.cancel()


class _Runnable(QRunnable):
    def __init__(self, fn: Callable, handle: JobHandle) -> None:
        super().__init__()
        self.fn, self.handle = fn, handle
        self.setAutoDelete(True)

    def run(self) -> None:
        token, sig = self.handle.cancel_token, self.handle.signals
        try:
            out = self.fn(token)
            if inspect.isgenerator(out):
                # The job checks `token` itself (it may want to save its work on cancel), so it is driven to
                # its own end; values it yields after a cancel are simply not delivered.
                try:
                    while True:
                        value = next(out)
                        if not token.cancelled:
                            sig.yielded.emit(value)
                except StopIteration as stop:
                    out = stop.value
            sig.result.emit(out)
        except Cancelled:
            pass
        except Exception as exc:  # every failure reaches the user, never vanishes in a thread
            log.error("job %s failed:\n%s", self.handle.name, traceback.format_exc())
            sig.error.emit(f"{self.handle.name}: {exc}")
        finally:
            sig.finished.emit()


_active: list[JobHandle] = []


def pool() -> QThreadPool:
    return QThreadPool.globalInstance()


def start_job(name: str, fn: Callable, *, on_result: Callable | None = None, on_yield: Callable | None = None,
              on_error: Callable | None = None, accept: Callable[[JobHandle], bool] | None = None) -> JobHandle:
    """Run `fn(cancel_token)` off the GUI thread; callbacks run on the GUI thread.

    `accept(handle)` (optional) filters late deliveries, e.g. of a job that is no longer the latest.
    """
    handle = JobHandle(name)

    def gated(callback):
        return lambda value: callback(value) if accept is None or accept(handle) else None

    # connect before starting, so that nothing the job emits can be missed
    if on_result:
        handle.signals.result.connect(gated(on_result))
    if on_yield:
        handle.signals.yielded.connect(gated(on_yield))
    if on_error:
        handle.signals.error.connect(on_error)
    _active.append(handle)
    handle.signals.finished.connect(lambda: _active.remove(handle) if handle in _active else None)
    pool().start(_Runnable(fn, handle))
    return handle


def running_jobs() -> list[JobHandle]:
    return [h for h in _active if not h.done]


def shutdown(timeout_ms: int = 5000) -> bool:
    """Cancel every job and wait for the pool to drain; True when no thread is left running."""
    for handle in list(_active):
        handle.cancel()
    return pool().waitForDone(timeout_ms)


class LatestJob:
    """One job slot where the latest request wins: starting a job cancels the previous one and drops its
    late results."""

    def __init__(self) -> None:
        self.current: JobHandle | None = None

    def start(self, name: str, fn: Callable, *, on_result: Callable | None = None,
              on_yield: Callable | None = None, on_error: Callable | None = None) -> JobHandle:
        if self.current is not None:
            self.current.cancel()
        self.current = start_job(name, fn, on_result=on_result, on_yield=on_yield, on_error=on_error,
                                 accept=lambda handle: handle is self.current)
        return self.current

    def cancel(self) -> None:
        if self.current is not None:
            self.current.cancel()
            self.current = None
