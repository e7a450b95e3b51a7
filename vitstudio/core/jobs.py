"""Cancellation and progress helpers shared by long-running core generators."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


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


class GPUOutOfMemory(RuntimeError):
    """The accelerator ran out of memory; the message says which batch size should fit. The job fails, the app
    and the CLI go on (one line, exit 2). Defined here, torch-free, so the CLI can catch it without importing torch."""
