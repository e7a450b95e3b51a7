"""The soak's probes for what a GUI stall was (tests/benchmarks/soak.py): how late a heartbeat fired, the GUI
thread's stacks while it was late, the slowest job deliveries, every event the loop handed out over 50 ms, and how
long each garbage collection took."""

from __future__ import annotations

import array
import gc
import os
import tempfile
import threading
import time
import traceback
from pathlib import Path


def keep_slowest(table: dict, key: str, took: float) -> None:
    """table[key] = (the longest time seen, how many times): the one tally of every probe below."""
    worst, times = table.get(key, (0.0, 0))
    table[key] = (max(worst, took), times + 1)


def slowest_first(table: dict) -> list[tuple[str, float, int]]:
    return sorted(((key, round(worst, 3), times) for key, (worst, times) in table.items()), key=lambda r: -r[1])


BEAT_MS = 20  # the heartbeat: how late each tick fires is how long the GUI thread could not answer
STALL_LIMIT_S = 0.1  # issue 29 item 14: no stall may pass 100 ms


class Stalls:
    """How late each heartbeat fired (the gap between ticks less the timer's period), and the worst ones with
    what the user was doing then, so a stall can be traced to the step that caused it."""

    def __init__(self, period_s: float, keep: int = 12) -> None:
        self.period, self.keep = period_s, keep
        self.last: float | None = None
        # 4 bytes a beat: a list of Python floats (32 bytes a beat, 180,000 beats an hour) grew the RSS the soak
        # measures by ~6 MB an hour by itself (seen with --trace)
        self.late = array.array("f")
        self.worst: list[tuple[float, float, str]] = []  # (late s, t s, doing)

    def beat(self, now: float, doing: str, t: float) -> None:
        if self.last is not None:
            late = max(0.0, now - self.last - self.period)
            self.late.append(late)
            if len(self.worst) < self.keep or late > self.worst[-1][0]:
                self.worst = sorted([*self.worst, (late, t, doing)], reverse=True)[:self.keep]
        self.last = now

    def summary(self) -> dict:
        ordered = sorted(self.late) or [0.0]
        return {"max_stall_s": round(ordered[-1], 3), "p99_stall_s": round(ordered[int(0.99 * (len(ordered) - 1))], 3),
                "stalls_over_limit": sum(late > STALL_LIMIT_S for late in ordered),
                "worst_stalls": [(round(late, 3), round(t, 1), doing) for late, t, doing in self.worst]}


class StallTracer:
    """A watchdog thread: while the heartbeat is late by more than the limit, it samples the GUI thread's Python
    stack every 20 ms, so each stall can be traced to the code it ran (`--stall-traces N` prints the N stacks
    seen most). A stack that ends in the event loop means the GUI thread was waiting for the GIL or the OS."""

    def __init__(self, stalls: Stalls, limit_s: float = STALL_LIMIT_S) -> None:
        import collections

        self.stalls, self.limit = stalls, limit_s
        self.gui = threading.get_ident()
        self.seen: collections.Counter = collections.Counter()
        self.running = True
        threading.Thread(target=self._watch, name="soak-stall-tracer", daemon=True).start()

    def _watch(self) -> None:
        while self.running:
            time.sleep(0.02)
            last = self.stalls.last
            if last is None or time.monotonic() - last < self.stalls.period + self.limit:
                continue
            stack = self._gui_stack()
            if stack:
                self.seen["\n".join(stack[-14:])] += 1

    def _gui_stack(self) -> list[str]:
        """The GUI thread's frames, outermost first, as faulthandler writes them: walking another thread's frame
        objects from Python (sys._current_frames) crashed Python 3.11 here, faulthandler reads them safely."""
        import faulthandler
        import re

        with tempfile.TemporaryFile("w+") as out:
            faulthandler.dump_traceback(out, all_threads=True)
            out.seek(0)
            text = out.read()
        for block in text.split("\n\n"):
            if block.startswith(f"Thread 0x{self.gui:016x}"):
                frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', block)
                return [f"{Path(name).name}:{line} {func}" for name, line, func in reversed(frames)]
        return []

    def top(self, n: int) -> list[tuple[int, str]]:
        self.running = False
        return [(count, stack) for stack, count in self.seen.most_common(n)]


class SlowDeliveries:
    """Times every job result and progress value the GUI thread delivers to a view (the app's own code on the GUI
    thread, where most stalls come from) and keeps the slowest per job name."""

    def __init__(self, keep_over_s: float = 0.05) -> None:
        from vitstudio.gui import workers

        self.over, self.slowest = keep_over_s, {}
        for name in ("_deliver_result", "_deliver_yield"):
            original = getattr(workers._Dispatcher, name)

            kind = name.removeprefix("_deliver_")

            def timed(dispatcher, handle, value, _original=original, _kind=kind):
                began = time.perf_counter()
                try:
                    _original(dispatcher, handle, value)
                finally:
                    took = time.perf_counter() - began
                    if took > self.over:
                        key = f"{handle.name} ({_kind})"
                        keep_slowest(self.slowest, key, took)

            setattr(workers._Dispatcher, name, timed)

    def report(self) -> list[tuple[str, float, int]]:
        return slowest_first(self.slowest)


def timed_application():
    """A QApplication that times every event it hands out from the event loop itself (not those sent inside
    another's handling) and keeps the slowest by event type and receiver: where a stall is Qt's own work (layout,
    paint) rather than a Python slot."""
    from PySide6.QtWidgets import QApplication

    class TimedApplication(QApplication):
        slowest: dict = {}
        depth = 0

        def notify(self, receiver, event) -> bool:  # noqa: N802 (Qt's name)
            kind = event.type()
            TimedApplication.depth += 1
            began = time.perf_counter()
            try:
                return super().notify(receiver, event)
            finally:
                TimedApplication.depth -= 1
                took = time.perf_counter() - began
                if TimedApplication.depth == 0 and took > 0.05:
                    views = receiver.views() if hasattr(receiver, "views") else []  # a scene: whose
                    owner = f" of {type(views[0]).__name__} in {type(views[0].parent()).__name__}" if views else ""
                    key = f"{kind.name} → {type(receiver).__name__} {receiver.objectName()}{owner}".strip()
                    keep_slowest(self.slowest, key, took)

    return TimedApplication


class Collections:
    """Python's cyclic collector: how long each collection of each generation took (it runs on whichever thread
    allocates, holding the GIL: a full pass over half a million objects stalls the GUI thread too)."""

    def __init__(self) -> None:
        self.began = 0.0
        self.took: dict[int, list[tuple[float, float]]] = {0: [], 1: [], 2: []}  # (when, seconds) per generation
        self.full_pass_callers: list[tuple[float, str]] = []  # (when, thread and stack): who asked for a full pass
        self.slow: list[tuple[float, int, float, int]] = []  # (when, generation, seconds, objects freed) over 50 ms
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.began = time.monotonic()
            if info["generation"] == 2:  # rare, so its stack is cheap to keep: names what triggered it
                stack = "".join(traceback.format_stack(limit=8)[:-1])
                self.full_pass_callers.append((self.began, f"{threading.current_thread().name}\n{stack}"))
        else:
            took = time.monotonic() - self.began
            self.took[info["generation"]].append((self.began, took))
            if took > 0.05:  # a slow pass that freed much was a graph dying (its finalisers), else a long walk
                self.slow.append((self.began, info["generation"], took, info["collected"]))

    def summary(self, since: float = 0.0) -> dict:
        """Per generation, the collections from `since` on (time.monotonic(): the window up, where stalls are
        counted); those before (imports, the window's build) are only counted."""
        gc.callbacks.remove(self._callback)
        summary = {}
        for g, seen in self.took.items():
            took = [t for when, t in seen if when >= since]
            summary[f"gc_gen{g}"] = {"count": len(took), "max_ms": round(1000 * max(took, default=0), 1),
                                     "over_50ms": sum(x > 0.05 for x in took), "before": len(seen) - len(took)}
        summary["slow_passes"] = [f"gen{g} {1000 * took:.0f} ms at {when - since:.1f} s, {freed} objects freed"
                                  for when, g, took, freed in self.slow if when >= since]
        summary["full_pass_callers"] = [f"at {when - since:.1f} s on {who}" for when, who in self.full_pass_callers
                                        if when >= since]
        return summary

    @staticmethod
    def rows(summary: dict) -> list[str]:
        """The report's lines: each generation's collections, the slow ones, and who asked for each full pass."""
        seen = dict(summary)
        callers, slow = seen.pop("full_pass_callers", []), seen.pop("slow_passes", [])
        return [*(f"  garbage collections, {g}: {c['count']}, longest {c['max_ms']} ms, {c['over_50ms']} over 50 ms "
                  f"(and {c.get('before', 0)} while the window was built)" for g, c in seen.items()),
                *(f"  slow collection: {line}" for line in slow),
                *(f"  full collection asked for {who}" for who in callers)]


class OtherLoad:
    """How many cores the machine's other processes used between two samples (/proc/stat's busy time less this
    process's own): a stall during another program's work is told apart from one of the app's own."""

    def __init__(self) -> None:
        self.last = self._read()
        self.series: list[tuple[float, float]] = []  # (t s at the interval's end, cores used by others)

    @staticmethod
    def _read() -> tuple[int, int, int] | None:
        try:
            cpu = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
            own = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
            return sum(cpu), sum(cpu) - cpu[3] - cpu[4], int(own[11]) + int(own[12])  # total, busy, utime+stime
        except (OSError, IndexError, ValueError):  # not Linux
            return None

    def mark(self, t: float) -> None:
        now = self._read()
        if now is not None and self.last is not None and now[0] > self.last[0]:
            total, busy, own = (a - b for a, b in zip(now, self.last))
            self.series.append((t, round(max(0, busy - own) / total * os.cpu_count(), 2)))
        self.last = now

    @staticmethod
    def at(series: list, t: float) -> float | None:
        """Others' cores in the interval holding `t`."""
        return next((cores for end, cores in series if end >= t), None)
