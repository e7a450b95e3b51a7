"""Jobs as the app's model asks for them, Qt-free: a request-keyed, latest-wins dispatcher (`KeyedJobs`) over a
`Runner` that the face implements. The GUI's runner (gui/workers.py) runs a job on a thread pool and delivers on the
GUI thread; `ScriptRunner` runs it in the caller's thread, for scripts and tests that drive the app without a
QApplication. Delivery rules are the same for both (`deliver_*` below), so what a test sees is what the window does.

A job is a module-level `fn(cancel, *inputs)`. If it returns a generator, every yielded value goes to `on_yield`
and the generator's return value to `on_result`; a failure reaches `on_error` as the exception object; `Cancelled`
is silent. `discard()` cancels a job and drops its callbacks (a superseded job delivers nothing); `cancel()` alone
still delivers the job's final result (a cancelled training run's report)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from vitstudio.core.jobs import Cancelled, CancelToken

from .evented import Keyed, ViewState

INTERACTIVE, LONG = "interactive", "long"


class JobHandle:
    """A job: cancel or discard it, ask whether it is done. Callbacks run on the thread that owns the app's model."""

    def __init__(self, name: str, kind: str, on_result=None, on_yield=None, on_error=None) -> None:
        self.name, self.kind = name, kind
        self.cancel_token = CancelToken()
        self.on_result, self.on_yield, self.on_error = on_result, on_yield, on_error
        self.done = False
        # set by KeyedJobs: the request the job answers, and who decides whether it is still the current one
        self.slot: str | None = None
        self.request: tuple | None = None
        self.guard: KeyedJobs | None = None
        self.queued_at = time.perf_counter()
        self.started_at: float | None = None  # when a thread picked it up (waits are measured from these)

    @property
    def cancelled(self) -> bool:
        return self.cancel_token.cancelled

    def cancel(self) -> None:
        """Ask the job to stop; its final result (if it returns one) is still delivered."""
        self.cancel_token.cancel()

    def discard(self) -> None:
        """Cancel and forget: nothing this job produces from now on reaches its callbacks."""
        self.cancel_token.cancel()
        self.drop_callbacks()

    def answers_current(self) -> bool:
        """False once the model that started the job has moved on to another request."""
        return self.guard is None or self.guard.is_current(self)

    def drop_callbacks(self) -> None:
        self.on_result = self.on_yield = self.on_error = None
        self.guard = None


# -- delivery: one set of rules for every runner -----------------------------------------------------------------
def deliver_yield(handle: JobHandle, value) -> None:
    if handle.on_yield is not None and not handle.cancelled and handle.answers_current():
        handle.on_yield(value)


def deliver_result(handle: JobHandle, value) -> None:
    handle.done = True  # the last delivery: callbacks may ask whether their job is still running
    if handle.on_result is not None and handle.answers_current():
        if handle.guard is not None:
            handle.guard.keep(handle, value)
        handle.on_result(value)


def deliver_error(handle: JobHandle, exc: BaseException) -> None:
    handle.done = True
    if handle.on_error is not None and handle.answers_current():
        if handle.guard is not None:
            handle.guard.keep_error(handle, exc)
        handle.on_error(exc)


def release(handle: JobHandle) -> None:
    handle.done = True
    handle.drop_callbacks()


class Call:
    """A job's function and its explicit inputs: `fn(cancel, *inputs)`. What a job uses is named here, never
    captured from a view (a closure over a panel would keep it, and through it the model, alive)."""

    __slots__ = ("fn", "inputs")

    def __init__(self, fn: Callable, inputs: tuple) -> None:
        self.fn, self.inputs = fn, inputs

    def __call__(self, cancel: CancelToken):
        return self.fn(cancel, *self.inputs)


def check_module_level(fn: Callable) -> None:
    if inspect.ismethod(fn) or getattr(fn, "__closure__", None) or "<" in getattr(fn, "__qualname__", "<"):
        raise TypeError(f"{fn!r}: a view's job is a module-level function taking its inputs explicitly")


class Runner(Protocol):
    """What a face provides: run `call(handle.cancel_token)` somewhere and deliver with the `deliver_*` rules."""

    def submit(self, handle: JobHandle, call: Callable) -> None: ...


class ScriptRunner:
    """Runs jobs in the caller's thread. `hold=True` queues them instead, so a script can act while a job is under
    way: `step(handle)` runs it to its next yield, `run()` runs everything queued to its end (in order)."""

    def __init__(self, hold: bool = False) -> None:
        self.hold = hold
        self.queued: list[tuple[JobHandle, Iterator | None, Callable | None]] = []

    def submit(self, handle: JobHandle, call: Callable) -> None:
        self.queued.append((handle, None, call))
        if not self.hold:
            self.run()

    def run(self) -> None:
        while self.queued:
            handle = self.queued[0][0]
            while self.step(handle):
                pass

    def step(self, handle: JobHandle) -> bool:
        """Run `handle`'s job to its next yield; False once it has ended (and left the queue)."""
        index = next(i for i, (h, _, _) in enumerate(self.queued) if h is handle)
        _, gen, call = self.queued[index]
        try:
            if gen is None:
                if handle.cancelled:  # superseded while it waited: never started
                    raise Cancelled
                handle.started_at = time.perf_counter()
                out = call(handle.cancel_token)
                if not inspect.isgenerator(out):
                    deliver_result(handle, out)
                    return self._end(handle)
                gen = out
                self.queued[index] = (handle, gen, None)
            deliver_yield(handle, next(gen))
            return True
        except StopIteration as stop:
            deliver_result(handle, stop.value)
        except Cancelled:
            pass
        except Exception as exc:  # every failure reaches the model's error callback, as in the window
            deliver_error(handle, exc)
        return self._end(handle)

    def _end(self, handle: JobHandle) -> bool:
        release(handle)
        self.queued = [q for q in self.queued if q[0] is not handle]
        return False


class KeyedJobs:
    """The one request-keyed job path (Orange3's `concurrent.py`: inputs passed explicitly, a result accepted only
    from the current task).

    Each slot names the state fields its result depends on (the model and image always). `start(slot, ...)` runs a
    module-level `fn(cancel, *inputs)` for the slot's current request; the job's yields, result and error reach
    the caller only while that request is still the slot's current one, and the result is kept as
    `Keyed(request, value)` (`current(slot)` answers it while it matches); so is an error (`failed(slot)`), so a
    view says why its request has no result instead of waiting for one, and does not ask for it again. Any change
    of the state that makes a pending job's request stale discards that job at once, so a model or image change
    discards every pending request, shown tab or hidden."""

    def __init__(self, view_state: ViewState, slots: dict[str, tuple[str, ...]], runner: Runner,
                 long: tuple[str, ...] = (), without_context: tuple[str, ...] = ()) -> None:
        """`without_context`: slots keyed by their own fields only, not the model and image (loading a model)."""
        self.view_state, self.runner = view_state, runner
        self.keys = dict(slots)
        self.contextual = {slot: slot not in without_context for slot in slots}
        self.kinds = {slot: LONG if slot in long else INTERACTIVE for slot in slots}
        self.pending: dict[str, JobHandle | None] = dict.fromkeys(slots)
        self.results: dict[str, Keyed | None] = dict.fromkeys(slots)
        self.errors: dict[str, Keyed | None] = dict.fromkeys(slots)
        view_state.connect(self._on_change)

    def request(self, slot: str) -> tuple:
        return self.view_state.request(*self.keys[slot], with_context=self.contextual[slot])

    def start(self, slot: str, name: str, fn: Callable, *inputs, on_result: Callable | None = None,
              on_yield: Callable | None = None, on_error: Callable | None = None) -> JobHandle:
        """Run `fn(cancel, *inputs)` for the slot's current request; the slot's previous job is discarded.
        `fn` must be a module-level function: a closure or a bound method would carry the view (and the model)
        into the worker, hidden from the reader and alive as long as the job."""
        check_module_level(fn)
        self.discard(slot)
        handle = JobHandle(name, self.kinds[slot], on_result, on_yield, on_error)
        handle.slot, handle.request, handle.guard = slot, self.request(slot), self
        self.pending[slot] = handle
        self.runner.submit(handle, Call(fn, inputs))
        return handle

    def is_current(self, handle: JobHandle) -> bool:
        return self.pending.get(handle.slot) is handle and handle.request == self.request(handle.slot)

    def keep(self, handle: JobHandle, value) -> None:
        self.results[handle.slot] = Keyed(handle.request, value)
        self.errors[handle.slot] = None
        self.pending[handle.slot] = None

    def keep_error(self, handle: JobHandle, exc: BaseException) -> None:
        self.errors[handle.slot] = Keyed(handle.request, exc)
        self.pending[handle.slot] = None

    def failed(self, slot: str) -> BaseException | None:
        """The error of the slot's current request, if its job failed."""
        return self.view_state.current(self.errors[slot], *self.keys[slot], with_context=self.contextual[slot])

    def current(self, slot: str):
        """The slot's result if it answers the current request, else None."""
        return self.view_state.current(self.results[slot], *self.keys[slot], with_context=self.contextual[slot])

    def running(self, slot: str) -> bool:
        handle = self.pending[slot]
        return handle is not None and not handle.done

    def discard(self, slot: str | None = None) -> None:
        """Forget the pending job of `slot` (every slot when None): nothing it produces is delivered."""
        for name in [slot] if slot is not None else list(self.pending):
            handle, self.pending[name] = self.pending[name], None
            if handle is not None:
                handle.discard()

    def clear(self, slot: str | None = None) -> None:
        """Discard the pending job(s) and drop the kept result(s)."""
        self.discard(slot)
        for name in [slot] if slot is not None else list(self.results):
            self.results[name] = self.errors[name] = None

    def _on_change(self, _name: str, _value) -> None:
        for slot in self.keys:
            request = self.request(slot)
            handle = self.pending[slot]
            if handle is not None and handle.request != request:
                self.discard(slot)
            kept = self.results[slot]
            context = 2 if self.contextual[slot] else len(request)
            if kept is not None and kept.request[:context] != request[:context]:  # another model or image: free it
                self.results[slot] = None
            error = self.errors[slot]
            if error is not None and error.request[:context] != request[:context]:
                self.errors[slot] = None


class KeyedSlot:
    """A one-slot `KeyedJobs` for work keyed by an explicit request rather than a state's fields (the thumbnails a
    list wants now, the quick head of these labels): starting a new request discards the pending job, and only the
    current request's yields, result and error are delivered."""

    def __init__(self, runner: Runner, kind: str = INTERACTIVE) -> None:
        self.view_state = ViewState(request=None)
        self.jobs = KeyedJobs(self.view_state, {"job": ("request",)}, runner,
                              long=("job",) if kind == LONG else (), without_context=("job",))

    def start(self, request, name: str, fn: Callable, *inputs, on_result: Callable | None = None,
              on_yield: Callable | None = None, on_error: Callable | None = None) -> JobHandle:
        self.view_state.update(request=request)
        return self.jobs.start("job", name, fn, *inputs, on_result=on_result, on_yield=on_yield, on_error=on_error)

    def cancel(self) -> None:
        self.jobs.clear()
        self.view_state.update(request=None)
