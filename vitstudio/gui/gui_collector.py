"""Python's cyclic garbage collector, run from a GUI-thread timer (workers.collect_garbage_on_gui_thread).

pyqtgraph's GarbageCollector, which this replaces, collects the oldest generation whenever ten collections of
the middle one have passed: about every two minutes of use, a walk over every object the app keeps besides the
frozen imports (~150k in a long session; 600k when nothing is frozen, measured at 0.25-0.43 s a pass on the GUI thread
here). CPython's own collector adds a rule
(gcmodule.c, `long_lived_pending < long_lived_total / 4`): a full pass only once the objects that reached the
oldest generation since the last one are a quarter of those that survived it. With it, a session whose objects
come and go at a steady rate walks them rarely, and garbage that reached the oldest generation is still freed
once enough of it piles up: the same promise as Python's default.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

FULL_PASS_GROWTH = 0.25  # CPython's share (gcmodule.c)


class GuiThreadCollector(QObject):
    def __init__(self, interval_s: float = 1.0) -> None:
        super().__init__()
        self.threshold = gc.get_threshold()
        gc.disable()
        self.long_lived = len(gc.get_objects(2))  # survivors of the last full pass (frozen objects not counted)
        self.full_passes = 0
        self.timer = QTimer(self)
        self.timer.setObjectName("gui-thread-collector")
        self.timer.timeout.connect(self.check)
        self.timer.start(int(interval_s * 1000))

    def check(self) -> None:
        young, middle, old = gc.get_count()
        if young <= self.threshold[0]:
            return
        gc.collect(0)
        if middle <= self.threshold[1]:
            return
        gc.collect(1)
        if old > self.threshold[2] and self.pending() > FULL_PASS_GROWTH * self.long_lived:
            self.full_pass()

    def pending(self) -> int:
        """Objects in the oldest generation beyond the last full pass's survivors (a list of them: ~1 ms a 100k)."""
        return len(gc.get_objects(2)) - self.long_lived

    def full_pass(self) -> None:
        gc.collect(2)
        self.long_lived = len(gc.get_objects(2))
        self.full_passes += 1

    def stop(self) -> None:
        self.timer.stop()
