"""The app layer's job path without Qt: `KeyedJobs` over a `ScriptRunner` keeps the window's rules (latest request
wins, a stale request delivers nothing, an error is kept for its request, a cancelled job still hands back its
final result)."""

from __future__ import annotations

import pytest

from vitstudio.app.evented import ViewState
from vitstudio.app.jobs import KeyedJobs, ScriptRunner


def counting(cancel, n: int):
    done = 0
    for _ in range(n):
        if cancel.cancelled:
            break
        done += 1
        yield done
    return done


def failing(cancel, text: str):
    raise ValueError(text)


def make(hold: bool):
    state = ViewState(model=None, image=None, paths=())
    runner = ScriptRunner(hold=hold)
    return state, runner, KeyedJobs(state, {"scan": ("paths",)}, runner)


def test_latest_request_wins_and_a_stale_one_delivers_nothing():
    """A job whose request went stale before it ran delivers nothing; the newer one's result is kept for its request and
    dropped with another model.
    """
    state, runner, jobs = make(hold=True)
    got = []
    state.update(model=1, paths=("a",))
    jobs.start("scan", "scan", counting, 3, on_result=lambda v: got.append(("a", v)))
    state.update(paths=("b",))  # the first request is stale: discarded before it ran
    jobs.start("scan", "scan", counting, 2, on_result=lambda v: got.append(("b", v)))
    runner.run()
    assert got == [("b", 2)]
    assert jobs.current("scan") == 2
    state.update(model=2)  # another model: what was kept for the old one is gone
    assert jobs.current("scan") is None


def test_cancel_mid_job_still_delivers_its_final_result_and_errors_are_kept_per_request():
    """A job stepped to its second yield and cancelled returns what it did; an error is kept for its request and
    forgotten with another one.
    """
    state, runner, jobs = make(hold=True)
    state.update(model=1, paths=("a",))
    seen, final = [], []
    handle = jobs.start("scan", "scan", counting, 10, on_yield=seen.append, on_result=final.append)
    assert runner.step(handle) and runner.step(handle)
    handle.cancel()  # as the user's Cancel: the job stops at its next check and returns what it did
    runner.run()
    assert seen == [1, 2] and final == [2] and handle.done
    errors = []
    jobs.start("scan", "scan", failing, "unreadable", on_error=errors.append)
    runner.run()
    assert [str(e) for e in errors] == ["unreadable"]
    assert str(jobs.failed("scan")) == "unreadable"
    state.update(paths=("b",))
    assert jobs.failed("scan") is None


def test_a_closure_is_refused_as_a_job():
    """A lambda (which would carry a view into the worker) is refused."""
    _, _, jobs = make(hold=False)
    with pytest.raises(TypeError, match="module-level"):
        jobs.start("scan", "scan", lambda cancel: 1)
