"""Workers free what their jobs captured, keep interactive work off the long-job pool, and obey latest-wins."""

from __future__ import annotations

import gc
import threading
import time
import weakref

from tests.conftest import TINY_SPEC
from tests.gui.helpers import settle as _idle
from vitstudio.gui import workers


def test_loading_models_in_turn_frees_the_old_ones(window, qtbot, tiny_weights, photos):
    """Five loads with an image open (so classification, attention and embeddings jobs all ran on each model):
    afterwards only the current model is alive.

    [window]
    """
    weights, _ = tiny_weights
    window.add_paths([str(photos["astronaut"])])
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    refs = []
    for i in range(5):
        window.show_tab(("predictions", "attention", "embeddings", "internals", "attention")[i])
        with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
            window.request_model(TINY_SPEC, "cpu", "fp32", str(weights))
        refs.append(weakref.ref(window.state.model))
        refs.append(weakref.ref(window.state.model.model))
        _idle(qtbot)  # debounced work and queued deliveries too
    qtbot.wait(0)
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert alive == [window.state.model, window.state.model.model], f"{len(alive)} objects still alive"


def test_finished_jobs_leave_no_handle(qtbot, qapp):
    """100 finished jobs leave no dispatcher entries, handles or captured payloads alive."""
    class Payload:  # something big a job's callback might capture
        pass

    payloads, handles, got = [], [], []
    for i in range(100):
        payload = Payload()
        payloads.append(weakref.ref(payload))
        handles.append(weakref.ref(workers.start_job(f"job {i}", lambda cancel, p=payload, i=i: i,
                                                     on_result=lambda v, p=payload: got.append(v))))
        del payload
    _idle(qtbot, 10000)
    qtbot.waitUntil(lambda: len(got) == 100, timeout=10000)
    qapp.processEvents()
    gc.collect()
    assert not workers.dispatcher().active
    assert sum(h() is not None for h in handles) == 0
    assert sum(p() is not None for p in payloads) == 0


def _short_generator_job(cancel):
    yield 1
    return 2


def _objects_of_the_workers_module() -> int:
    gc.collect()
    return sum(type(o).__module__ == workers.__name__ and type(o) is not workers._Dispatcher for o in gc.get_objects())


def test_the_pools_hold_no_python_reference_to_a_job(qtbot, qapp):
    """Found by the soak: a started QRunnable subclass became the pool's Python child once `start()` returned; a
    short job that finished (and was auto-deleted) before that was never unparented, so the pool kept its dead
    wrapper forever, one per such job. What a pool thread runs must not be the pool's Python child at all."""
    gate = threading.Event()
    handles = [workers.start_job(f"waiting {kind}", lambda cancel: gate.wait(5), kind=kind)
               for kind in (workers.INTERACTIVE, workers.LONG)]
    qtbot.waitUntil(lambda: all(h.started_at is not None for h in handles), timeout=5000)
    held = [type(o).__name__ for kind in (workers.INTERACTIVE, workers.LONG)
            for o in gc.get_referents(workers.pool(kind)) if type(o).__module__ == workers.__name__]
    gate.set()
    _idle(qtbot, 10000)
    assert held == []


def test_short_jobs_leave_nothing_behind(qtbot, qapp):
    """40 short generator jobs leave no workers-module objects behind."""
    before = _objects_of_the_workers_module()
    for i in range(40):
        workers.start_job(f"short {i}", _short_generator_job, kind=(workers.INTERACTIVE, workers.LONG)[i % 2])
    _idle(qtbot, 10000)
    # a pool thread lets go of its task just after the GUI thread hears that the job finished
    qtbot.waitUntil(lambda: _objects_of_the_workers_module() == before, timeout=5000)


def test_jobs_run_below_the_gui_threads_priority(qtbot, qapp):
    """A job's thread (either pool) is nicer than the GUI thread, so the event loop gets a core first; torch's own
    threads, started from a job, inherit it.

    A job on either pool runs at the GUI thread's nice value + BACKGROUND_NICE (after a parallel torch op; not lowered
    further by later jobs); the GUI thread's own is untouched. [Linux only]
    """
    import os
    import sys

    import pytest

    if not sys.platform.startswith("linux"):
        pytest.skip("nice values per thread are Linux's")

    def nice_of_this_thread(cancel):
        import torch

        torch.ones(64, 64) @ torch.ones(64, 64)  # a parallel op, as a model's forward
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    gui = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    got = []
    for kind in (workers.INTERACTIVE, workers.LONG):
        workers.start_job(f"nice {kind}", nice_of_this_thread, kind=kind, on_result=got.append)
    qtbot.waitUntil(lambda: len(got) == 2, timeout=10000)
    assert all(nice == min(19, gui + workers.BACKGROUND_NICE) for nice in got), (gui, got)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == gui  # the GUI thread is untouched


def test_a_slider_job_does_not_wait_behind_long_jobs(qtbot, qapp):
    """Two long jobs fill the long-job pool (a training run and a folder scan); an interactive job still starts
    at once."""
    release = threading.Event()

    def long_job(cancel):
        while not release.is_set() and not cancel.cancelled:
            time.sleep(0.01)

    longs = [workers.start_job(f"long {i}", long_job, kind=workers.LONG) for i in range(2)]
    qtbot.waitUntil(lambda: all(h.started_at is not None for h in longs), timeout=5000)
    got = []
    quick = workers.start_job("slider", lambda cancel: "drawn", on_result=got.append)
    qtbot.waitUntil(lambda: got == ["drawn"], timeout=5000)
    wait_s = quick.started_at - quick.queued_at
    print(f"interactive job waited {wait_s * 1000:.1f} ms with the long-job pool full")
    assert wait_s < 0.5
    # the reference: a third long job does queue behind the two
    third = workers.start_job("long 3", lambda cancel: None, kind=workers.LONG)
    qtbot.wait(300)
    assert third.started_at is None
    release.set()
    _idle(qtbot, 10000)


def _failing_late(cancel, gate):
    gate.wait(5)
    raise RuntimeError("stale failure")


def _fresh(cancel):
    return "fresh"


def test_a_superseded_job_shows_no_error(qtbot, qapp):
    """KeyedSlot: an old request's late error is dropped; only the new result arrives."""
    slot = workers.KeyedSlot()
    errors, results = [], []
    gate = threading.Event()
    slot.start("old request", "old", _failing_late, gate, on_error=errors.append)
    slot.start("new request", "new", _fresh, on_result=results.append, on_error=errors.append)
    gate.set()
    _idle(qtbot, 10000)
    qapp.processEvents()
    assert results == ["fresh"] and errors == []


def test_a_superseded_model_load_error_shows_nothing(window, qtbot, tiny_weights):
    """A load that fails after a newer load was requested: no dialog, no error in the log.

    [window]
    """
    weights, _ = tiny_weights
    window.request_model("vit_tiny_patch16_224.augreg_in21k")  # fails (offline), but is superseded at once
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(TINY_SPEC, "cpu", "fp32", str(weights))
    _idle(qtbot)
    assert "not in the local cache" not in window.log_view.toPlainText()


def test_garbage_is_collected_on_the_gui_thread_only(window, qtbot):
    """With a window open, automatic collection is off (so no worker thread ever runs it) and a GUI-thread timer
    collects instead; shutting down hands collection back to Python.

    [window]
    """
    import gc

    assert not gc.isenabled()

    class Cycle:
        pass

    ref = None
    for _ in range(2000):  # cyclic garbage, more than one generation-0 threshold
        a, b = Cycle(), Cycle()
        a.b, b.a = b, a
        ref = weakref.ref(a)
        del a, b
    assert ref() is not None  # nobody collected it in passing
    qtbot.waitUntil(lambda: ref() is None, timeout=5000)  # the GUI-thread timer did
    workers.shutdown(1000)
    assert gc.isenabled()


def test_a_job_finishing_after_the_dispatcher_is_gone_is_dropped_quietly(qapp, caplog):
    """A job still finishing when the application has torn its dispatcher down (a pytest process or the app
    exiting) delivers nothing and logs nothing: emitting on the deleted dispatcher raised "Signal source has been
    deleted" three times and logged the job as failed."""
    import logging

    import shiboken6

    from vitstudio.app.jobs import JobHandle

    gone = workers._Dispatcher()
    handle = JobHandle("Memory plan", workers.INTERACTIVE)
    task = workers._Task(lambda _cancel: 42, handle, gone)
    shiboken6.delete(gone)
    with caplog.at_level(logging.INFO, logger="vitstudio"):
        task()  # what the pool thread runs, here on this thread
    assert not [r for r in caplog.records if "failed" in r.getMessage() or r.levelno >= logging.ERROR]
    assert task.handle is None and task.dispatcher is None


def test_a_job_whose_receiver_qt_deleted_delivers_nothing_and_is_cancelled(qtbot, qapp):
    """A view that Qt deletes (its parent closed) while its job still yields, as the table's thumbnail cache: nothing
    more reaches its methods (no "Signal source has been deleted" in the event loop), the job is cancelled and
    finishes."""
    import shiboken6
    from PySide6.QtCore import QObject, Signal

    class Receiver(QObject):
        got = Signal(object)

        def take(self, value):
            self.got.emit(value)

    receiver, gate, seen = Receiver(), threading.Event(), []
    receiver.got.connect(seen.append)

    def job(cancel):
        yield 1
        gate.wait(10)
        for i in range(2, 200):
            if cancel.cancelled:
                return "stopped"
            yield i
            time.sleep(0.01)
        return "ran to the end"

    handle = workers.start_job("thumbnails", job, on_yield=receiver.take, kind=workers.LONG)
    qtbot.waitUntil(lambda: seen == [1], timeout=10000)
    shiboken6.delete(receiver)
    gate.set()
    qtbot.waitUntil(lambda: handle.done, timeout=10000)
    assert handle.cancelled and seen == [1]
