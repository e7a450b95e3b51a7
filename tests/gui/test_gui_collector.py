"""The GUI thread's garbage collector (issue 29 item 14): pyqtgraph's walked every object the app keeps about every
100 s (0.1-0.4 s on the GUI thread, the soak's longest stalls); ours makes a full pass only once the oldest
generation grew by a quarter since the last one, as CPython's own collector does, and still frees the garbage
that reached that generation."""

from __future__ import annotations

import gc
import weakref

import pytest


@pytest.fixture
def collector(qapp):
    from vitstudio.gui.gui_collector import GuiThreadCollector

    was_enabled = gc.isenabled()
    made = GuiThreadCollector(interval_s=3600)  # driven by hand
    made.stop()
    yield made
    if was_enabled:
        gc.enable()


def _past_every_threshold(collector) -> list:
    """Counts over all three thresholds, as a busy session's would be, without touching the oldest generation."""
    t0, t1, t2 = collector.threshold
    for _ in range(t2 + 1):
        gc.collect(1)  # each counts one towards the oldest generation's pass
    for _ in range(t1 + 1):
        gc.collect(0)
    return [[] for _ in range(t0 + 100)]  # allocations count towards the youngest (frees take some back)


class Node:
    pass


def test_a_steady_session_makes_no_full_pass_and_growth_makes_one(collector):
    """With every generation's count past its threshold and the oldest generation steady, `check()` makes no full pass
    (a cycle that became garbage there stays, weakref); after it grows by 30 % one full pass frees that cycle;
    reference: gcmodule.c's long_lived_pending rule.
    """
    ballast = [[] for _ in range(20 * collector.threshold[0])]  # a session's long-lived objects (the test
    # process froze most of its own): what a youngest generation's worth of survivors is small beside
    cycle = Node()
    cycle.me = cycle
    gone = weakref.ref(cycle)
    gc.collect(1)  # it survives into the oldest generation, then becomes garbage there
    del cycle
    collector.long_lived = len(gc.get_objects(2))

    young = _past_every_threshold(collector)  # (kept: a freed object takes its count back)
    assert all(now > limit for now, limit in zip(gc.get_count(), collector.threshold))
    collector.check()
    assert collector.full_passes == 0  # pyqtgraph's collector made one here (ten middle passes had gone by)
    assert gone() is not None

    kept = [[] for _ in range(int(0.3 * collector.long_lived) + 1)]  # a quarter more long-lived objects
    gc.collect(1)
    younger = _past_every_threshold(collector)  # (not bound to `young`: its freed lists would take theirs back)
    collector.check()
    assert collector.full_passes == 1 and gone() is None  # the garbage in the oldest generation is freed
    assert collector.long_lived >= len(kept) + len(ballast) and young and younger


def test_the_app_collects_with_it(qapp):
    """`workers.collect_garbage_on_gui_thread` installs `GuiThreadCollector` and turns automatic collection off."""
    from vitstudio.gui import workers
    from vitstudio.gui.gui_collector import GuiThreadCollector

    workers.collect_garbage_on_gui_thread()
    assert isinstance(workers._collector, GuiThreadCollector) and not gc.isenabled()



LABEL_REVIEW_AFTER_STARTUP = r"""
import sys
import numpy as np
from vitstudio.gui.startup import import_heavy
import_heavy(None)  # what the app's "Loading libraries" job does before it freezes what is alive
before = set(sys.modules)
from vitstudio.core.folder.label_review import review_labels
features = np.random.default_rng(0).normal(size=(40, 8)).astype("float32")
review_labels([f"{i}.png" for i in range(40)], features, np.repeat([0, 1], 20), ["a", "b"])
from vitstudio.gui.common.map_view import lookup_table
lookup_table("inferno")  # the first map drawn: its colours are matplotlib's
print(sorted(m for m in set(sys.modules) - before if not m.startswith("vitstudio")))
"""


def test_the_first_label_review_imports_nothing_the_startup_did_not_freeze():
    """The soak's stall at ~31 s: the first label review imported cleanlab, scikit-learn, SciPy and pandas (1,230
    modules) on its worker, and the GUI thread's collector walked their objects three times in a row (62 + 113 +
    113 ms) and at every full pass after. The start-up imports them before `freeze_long_lived`; a review after it
    imports no library module, nor does the first map drawn in a colormap (matplotlib, which the app's jobs import
    inside themselves: app/job_modules.py brings it in with the start-up). In a process of its own: this one has
    imported them long ago.

    [subprocess]
    """
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", LABEL_REVIEW_AFTER_STARTUP], capture_output=True, text=True,
                         timeout=300, env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout[-2000:]
