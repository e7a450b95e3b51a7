"""Cancellation and progress helpers shared by long-running core generators."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from queue import Full, Queue
from typing import TypeVar

from vitstudio.core.errors import UserFacingError

T = TypeVar("T")


class Cancelled(Exception):
    """Raised inside a job when its CancelToken was set."""


class CancelToken:
    """A thread-safe flag a caller sets to ask a running job to stop at its next check; it can also pause a job
    that calls `wait_while_paused()` between units of work."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._running = threading.Event()
        self._running.set()

    def cancel(self) -> None:
        self._event.set()
        self._running.set()  # a paused job wakes up to notice

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def wait_while_paused(self) -> None:
        while not self._running.wait(0.1):
            pass
        self.raise_if_cancelled()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()


@dataclass(frozen=True)
class Progress:
    """One progress record: `done` of `total` units (total 0 = unknown), with a short message."""

    done: int
    total: int
    message: str = ""

    @property
    def fraction(self) -> float | None:
        return self.done / self.total if self.total else None


class Throttle:
    """Lets an event through at most `rate_hz` times per second (always the first and a forced one)."""

    def __init__(self, rate_hz: float = 10.0) -> None:
        self._interval = 1.0 / rate_hz
        self._last = -float("inf")

    def ready(self, force: bool = False) -> bool:
        now = time.monotonic()
        if force or now - self._last >= self._interval:
            self._last = now
            return True
        return False


class GPUOutOfMemory(RuntimeError, UserFacingError):
    """The accelerator ran out of memory; the message says which batch size should fit. The job fails, the app
    and the CLI go on (one line, exit 2). Defined here, torch-free, so the CLI can catch it without importing torch."""


def prefetched(items: Iterator[T], depth: int = 2, name: str = "vitstudio-prefetch") -> Iterator[T]:
    """`items`, produced on a background thread up to `depth` ahead of the consumer (e.g. the next batches are
    decoded or augmented while the model runs on this one; torch and Pillow release the GIL in their kernels).

    Order is kept; an exception in the producer is raised in the consumer at that point; a consumer that stops early
    (cancel, error) stops the producer after its current item, and `items` is closed on the producer's thread."""
    queue: Queue = Queue(maxsize=max(1, depth))
    stop, done = threading.Event(), object()

    def put(item) -> bool:
        # a consumer that vanished without closing us (the interpreter is exiting: the main thread has stopped)
        # also ends the producer; it is not a daemon, so exit waits for it instead of killing it inside a kernel
        while not stop.is_set() and threading.main_thread().is_alive():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(done)
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name=name, daemon=False)
    worker.start()
    try:
        while True:
            item = queue.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(5)
