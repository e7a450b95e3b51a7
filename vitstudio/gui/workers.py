"""The only module that creates threads. Jobs run on one of two QThreadPools; results come back as queued signals.

A job is a callable `fn(cancel: CancelToken)` that checks the token between units of work (raising
`Cancelled`, or returning early with what it has). If it returns a generator, every yielded value is
delivered to `on_yield` on the GUI thread and the generator's return value goes to `on_result`. Failures reach
`on_error` as the exception object itself (and the log); `Cancelled` is silent.

Two pools, so that a training run or a folder scan never queues a slider: `INTERACTIVE` (analyses of the image
on screen, model loads) and `LONG` (training, folder scans, reading many files).

Lifetimes: a handle holds its callbacks as plain Python attributes, and every delivery goes through ONE
dispatcher object that is connected once, to its own bound methods. No per-job QObject, no lambda connected to a
Qt signal: Python<->C++ reference cycles (invisible to the garbage collector, keeping models alive) cannot form.
When a job finishes, its handle drops its callbacks and leaves the active list, so whatever they captured is freed.

Garbage collection runs on the GUI thread only (`collect_garbage_on_gui_thread`): Python's collector runs in
whichever thread happens to allocate, and a cycle holding Qt widgets collected in a worker destroys widgets off
the GUI thread, which deadlocks against the GUI thread (seen in the test suite: a worker's `torch.save` triggered
a collection that destroyed a QMenu's wrapper while the GUI thread deleted its children).

Latest request wins, errors included (as Orange3's `concurrent.py`): `discard()` cancels a job and drops its
callbacks, so a superseded job delivers nothing at all. `cancel()` alone (a user pressing Cancel) still delivers
the job's final result, e.g. a cancelled training run's report.

Views start their work through `ViewJobs`, the app layer's request-keyed path (vitstudio/app/jobs.py, whose
delivery rules this module's dispatcher applies) run on these pools: a module-level function with explicit
inputs, run for the view state's current request (model, image, parameters); its yields, result and error are
delivered only while that request is still current, and a change of the view state discards every job whose
request it made stale (a model or image change: all of them).
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

from PySide6.QtCore import QObject, QThread, QThreadPool, Signal
from shiboken6 import isValid

from vitstudio.app import jobs
from vitstudio.app.evented import ViewState
from vitstudio.app.jobs import (
    INTERACTIVE,
    LONG,
    JobHandle,
    KeyedJobs,
    deliver_error,
    deliver_result,
    deliver_yield,
    release,
)
from vitstudio.app.notices import describe, told  # noqa: F401 (describe: the views' one line)
from vitstudio.core.jobs import Cancelled

log = logging.getLogger("vitstudio.jobs")

BACKGROUND_NICE = 5  # how much nicer than the GUI thread a pool thread is (Linux; 19 is the nicest)
# the process's nice value when the window started (this module is imported on the GUI thread)
_GUI_NICE = os.getpriority(os.PRIO_PROCESS, 0) if sys.platform.startswith("linux") else 0


def run_in_background() -> None:
    """At each job's start, on its pool thread: below the GUI thread's priority, so a job never takes a core the
    event loop is waiting for. On two cores a model load and two analyses left the GUI thread half a core, and the
    window froze for 120-200 ms on every model switch. Linux: a nice value of the thread's own (threads are tasks
    there, and Qt's thread priorities do nothing under the default scheduler), set to the GUI's + BACKGROUND_NICE,
    not raised again (Python forgets a pool thread's thread-locals between two jobs); elsewhere Qt's LowPriority.
    torch's own threads, started by a job's first parallel operation, inherit it."""
    with contextlib.suppress(OSError):  # a sandbox that forbids it: the job runs all the same
        if sys.platform.startswith("linux"):
            tid, target = threading.get_native_id(), min(19, _GUI_NICE + BACKGROUND_NICE)
            if os.getpriority(os.PRIO_PROCESS, tid) < target:
                os.setpriority(os.PRIO_PROCESS, tid, target)
        else:
            QThread.currentThread().setPriority(QThread.LowPriority)


class _Dispatcher(QObject):
    """Lives on the GUI thread; worker threads emit its signals (queued), its own methods deliver them."""

    yielded = Signal(object, object)  # handle, value
    result = Signal(object, object)  # handle, value
    error = Signal(object, object)  # handle, exception
    finished = Signal(object)  # handle

    def __init__(self) -> None:
        super().__init__()
        self.active: list[JobHandle] = []
        self.yielded.connect(self._deliver_yield)
        self.result.connect(self._deliver_result)
        self.error.connect(self._deliver_error)
        self.finished.connect(self._release)

    def _deliver_yield(self, handle: JobHandle, value) -> None:
        _discard_if_receiver_deleted(handle)
        deliver_yield(handle, value)

    def _deliver_result(self, handle: JobHandle, value) -> None:
        _discard_if_receiver_deleted(handle)
        deliver_result(handle, value)

    def _deliver_error(self, handle: JobHandle, exc: BaseException) -> None:
        _discard_if_receiver_deleted(handle)
        deliver_error(handle, exc)

    def _release(self, handle: JobHandle) -> None:
        release(handle)
        if handle in self.active:
            self.active.remove(handle)


def _discard_if_receiver_deleted(handle: JobHandle) -> None:
    """A callback that is a method of a Qt object Qt has deleted meanwhile (its parent view closed while the job ran:
    a table's thumbnail cache then emitted on its deleted self, "Signal source has been deleted"): the job is
    discarded, so nothing more is delivered and it stops at its next check."""
    for callback in (handle.on_yield, handle.on_result, handle.on_error):
        receiver = getattr(callback, "__self__", None)
        if isinstance(receiver, QObject) and not isValid(receiver):
            handle.discard()
            return


class _Delivery:
    """The dispatcher's signals as a pool thread emits them: once the application has torn the dispatcher down (a
    job still finishing as the process exits) there is no one to deliver to, and the result is dropped — emitting
    on it raised "Signal source has been deleted" three times per job, logged as the job's failure."""

    __slots__ = ("dispatcher",)

    def __init__(self, dispatcher: _Dispatcher) -> None:
        self.dispatcher = dispatcher

    def __getattr__(self, name: str):
        return self if not isValid(self.dispatcher) else getattr(self.dispatcher, name)

    def emit(self, *_args) -> None:
        """A signal of a dispatcher already gone: nothing to do."""


class _Task:
    """What a pool thread runs: a plain callable, handed to `QThreadPool.start(callable)`. Not a QRunnable
    subclass: PySide6 makes the pool the Python parent of a started QRunnable only after `start()` returns, and a
    short job that finished (and was auto-deleted) before that is never unparented, so the pool kept its dead
    wrapper forever (one per short job)."""

    __slots__ = ("fn", "handle", "dispatcher")

    def __init__(self, fn: Callable, handle: JobHandle, dispatcher: _Dispatcher) -> None:
        self.fn, self.handle, self.dispatcher = fn, handle, dispatcher

    def __call__(self) -> None:
        handle, d = self.handle, _Delivery(self.dispatcher)
        fn, self.fn = self.fn, None  # the task must not keep the job's closure (and its model) alive
        run_in_background()
        handle.started_at = time.perf_counter()
        token = handle.cancel_token
        try:
            if token.cancelled:  # superseded while it waited for a thread: do not start it at all
                raise Cancelled
            out = fn(token)
            del fn
            if inspect.isgenerator(out):
                # The job checks `token` itself (it may want to save its work on cancel), so it is driven to
                # its own end; values it yields after a cancel are simply not delivered.
                gen, out = out, None
                try:
                    while True:
                        value = next(gen)
                        if not token.cancelled:
                            d.yielded.emit(handle, value)
                        del value
                except StopIteration as stop:
                    out = stop.value
                del gen
            d.result.emit(handle, out)
        except Cancelled:
            pass
        except Exception as exc:  # every failure reaches the user, never vanishes in a thread
            details = traceback.format_exc()
            if told(exc):  # a message for the user (the window shows it): one line, not a traceback on stderr
                log.info("job %s: %s", handle.name, exc)
            else:
                log.error("job %s failed:\n%s", handle.name, details)
            exc.__traceback__ = None  # the frames hold the job's locals (models, tensors); the text stays
            with contextlib.suppress(AttributeError):
                exc.traceback_text = details  # a Notice's details on demand
            d.error.emit(handle, exc)
        finally:
            d.finished.emit(handle)
            self.handle = self.dispatcher = None


_dispatcher: _Dispatcher | None = None
_pools: dict[str, QThreadPool] = {}


def dispatcher() -> _Dispatcher:
    global _dispatcher
    if _dispatcher is None:
        _dispatcher = _Dispatcher()
    return _dispatcher


def pool(kind: str = INTERACTIVE) -> QThreadPool:
    """The pool for `kind`. Interactive work gets the global pool; long jobs their own, of two threads."""
    if kind not in _pools:
        if kind == INTERACTIVE:
            p = QThreadPool.globalInstance()
            p.setMaxThreadCount(max(2, p.maxThreadCount()))
        elif kind == LONG:
            p = QThreadPool()
            p.setMaxThreadCount(2)
        else:
            raise ValueError(f"Unknown job kind '{kind}'; use '{INTERACTIVE}' or '{LONG}'.")
        _pools[kind] = p
    return _pools[kind]


def start_job(name: str, fn: Callable, *, on_result: Callable | None = None, on_yield: Callable | None = None,
              on_error: Callable | None = None, kind: str = INTERACTIVE) -> JobHandle:
    """Run `fn(cancel_token)` off the GUI thread on the `kind` pool; callbacks run on the GUI thread."""
    handle = JobHandle(name, kind, on_result, on_yield, on_error)
    _submit(handle, fn)
    return handle


def _submit(handle: JobHandle, fn: Callable) -> None:
    d = dispatcher()
    d.active.append(handle)
    pool(handle.kind).start(_Task(fn, handle, d))


def running_jobs() -> list[JobHandle]:
    return [h for h in (dispatcher().active if _dispatcher is not None else []) if not h.done]


_collector = None


def collect_garbage_on_gui_thread(interval_s: float = 1.0) -> None:
    """Turn automatic collection off and collect from a GUI-thread timer instead (gui_collector: a full pass only
    when the oldest generation grew by a quarter, as CPython's own collector decides)."""
    global _collector
    if _collector is None:
        from .gui_collector import GuiThreadCollector

        _collector = GuiThreadCollector(interval_s)


def freeze_long_lived() -> None:
    """Take every object alive now out of the collector's sight (gc.freeze). After the imports that is ~450k objects
    of torch, timm, Qt and pyqtgraph, which every full collection walked: ~330 ms on the GUI thread each time (the
    collector above runs there), ~4 ms once they are frozen. Frozen garbage is never collected, so call it only
    when what is alive lives until exit: after the imports, before any model, image or window exists."""
    gc.collect()
    gc.freeze()


def shutdown(timeout_ms: int = 5000) -> bool:
    """Cancel every job and wait for both pools to drain; True when no thread is left running. Then hand garbage
    collection back to Python, after one full collection here, on the GUI thread."""
    for handle in running_jobs():
        handle.discard()
    deadline = time.perf_counter() + timeout_ms / 1000
    ok = True
    for p in list(_pools.values()):
        left = max(0, int((deadline - time.perf_counter()) * 1000))
        ok = p.waitForDone(left) and ok
    if _dispatcher is not None:  # deliver the queued 'finished' events so handles are released
        from PySide6.QtCore import QCoreApplication

        QCoreApplication.sendPostedEvents(_dispatcher)
    global _collector
    if _collector is not None:
        _collector.stop()
        _collector = None
        gc.enable()
    gc.collect()
    return ok


class QtRunner:
    """The window's runner of the app's jobs: a thread of the job's pool, deliveries queued to the GUI thread."""

    def submit(self, handle: JobHandle, call) -> None:
        _submit(handle, call)


QT_RUNNER = QtRunner()


class ViewJobs(KeyedJobs):
    """The app layer's `KeyedJobs` run on the window's pools (see vitstudio/app/jobs.py for the rules)."""

    def __init__(self, view_state: ViewState, slots: dict[str, tuple[str, ...]], long: tuple[str, ...] = (),
                 without_context: tuple[str, ...] = ()) -> None:
        super().__init__(view_state, slots, QT_RUNNER, long=long, without_context=without_context)


class KeyedSlot(jobs.KeyedSlot):
    """The app layer's one-slot keyed jobs run on the window's pools."""

    def __init__(self, kind: str = INTERACTIVE) -> None:
        super().__init__(QT_RUNNER, kind)
