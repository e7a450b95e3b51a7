"""Runs survive anything: `vitstudio finetune` SIGKILLed at many points (before the first checkpoint, between the
metrics row and the checkpoint, in the middle of atomic writes, mid-epoch) is resumed or restarted to the end, with
every epoch in metrics.csv exactly once and no temp files left; one process owns a run at a time."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset

ROOT = Path(__file__).resolve().parents[2]
SPEC3 = TINY_SPEC.replace("classes=5", "classes=3")
EPOCHS = 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("data") / "colours", per_class=8)


def _cli(args, die_at=None, timeout=180):
    env = {k: v for k, v in os.environ.items() if k != "VITSTUDIO_DIE_AT"}
    if die_at:
        env["VITSTUDIO_DIE_AT"] = die_at
    return subprocess.run([sys.executable, "-m", "vitstudio", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _start_args(data, out):
    return ["finetune", str(data), "--model", SPEC3, "--out", str(out), "--preset", "scratch", "--epochs",
            str(EPOCHS), "--batch-size", "8", "--quiet"]


def _epochs_logged(out):
    with (out / "metrics.csv").open() as fh:
        return [int(float(row["epoch"])) for row in csv.DictReader(fh)]


def _leftovers(out):
    return [p.name for p in out.iterdir() if p.name.endswith(".tmp") or p.name.startswith(".staging-")]


KILL_POINTS = [
    ("before-first-checkpoint", "restart"),  # the run folder exists, no epoch finished
    ("before-rename-checkpoint-last.pt:1", "restart"),  # the first checkpoint half-written
    ("after-metrics-row:2", "resume"),  # epoch 1's row logged, its checkpoint not yet written
    ("before-rename-checkpoint-last.pt:3", "resume"),  # a checkpoint write interrupted before its rename
    ("before-rename-model.safetensors:2", "resume"),  # a best-model save interrupted (staging folder left)
    ("train-step:9", "resume"),  # mid-epoch
    ("before-rename-status.json:2", "resume"),  # the final status write (all epochs done)
    ("before-rename-eval.json", "resume"),  # the final evaluation: not "finished" until eval.json is on disk
]


@pytest.mark.parametrize("point, then", KILL_POINTS)
def test_killed_run_resumes_or_restarts_to_the_end(data, tmp_path, point, then):
    out = tmp_path / "run"
    killed = _cli(_start_args(data, out), die_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert out.is_dir()
    status = json.loads((out / "status.json").read_text())["status"] if (out / "status.json").exists() else None
    assert status in (None, "running")  # it never got to say otherwise
    from vitstudio.core.train.runs import run_status

    assert run_status(out) in ("killed", "incomplete")  # nobody holds its lock any more
    if point.startswith("before-rename"):
        assert _leftovers(out)  # the interrupted write left its temp file or staging folder behind
    if then == "restart":  # no finished epoch: the very same command starts it over
        again = _cli(_start_args(data, out))
    else:  # the run records everything: --out and --resume are enough
        again = _cli(["finetune", "--out", str(out), "--resume", "--quiet"])
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((out / "status.json").read_text())["status"] == "finished"
    assert (out / "eval.json").is_file()  # everything "finished" promises
    assert _epochs_logged(out) == list(range(EPOCHS))  # each epoch exactly once
    assert not _leftovers(out)  # removed when the run was picked up again
    from vitstudio.core.models.loading import load_model

    assert load_model(str(out)).labels == ["blue", "green", "red"]


def test_one_process_owns_a_run(data, tmp_path):
    """A second start or resume of a run being trained fails at once with a clear message."""
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config
    from vitstudio.core.train.runlock import RunInUse, RunLock

    out = tmp_path / "run"
    held = RunLock(out).acquire()  # as if another process were training it
    try:
        with pytest.raises(RunInUse, match="being trained right now by pid"):
            next(fine_tune(make_config(str(data), SPEC3, str(out), "scratch", epochs=1)))
        res = _cli(_start_args(data, out))
        assert res.returncode == 2 and "being trained right now" in res.stderr and "Traceback" not in res.stderr
    finally:
        held.release()


def test_ctrl_c_writes_status_and_recommends_what_works(data, tmp_path):
    out = tmp_path / "run"
    # Ctrl+C lands mid-run: epochs of this tiny run take ~10 ms, so the run must be long enough to be caught
    long_run = [a if a != str(EPOCHS) else "400" for a in _start_args(data, out)[:-1]]
    # a suite started in the background (`make test &`) ignores SIGINT, and children inherit that: give the run
    # Python's usual Ctrl+C handling, as in a terminal
    proc = subprocess.Popen([sys.executable, "-m", "vitstudio", *long_run], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    import time

    deadline = time.time() + 120
    while time.time() < deadline and not (out / "metrics.csv").exists() or not _safe_rows(out):
        time.sleep(0.2)
        assert time.time() < deadline, "no epoch finished in time"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert json.loads((out / "status.json").read_text())["status"] == "interrupted"
    assert f"vitstudio finetune --out {out} --resume" in err
    done = json.loads((out / "status.json").read_text())["epochs_done"]
    # Ctrl+C never lands between an epoch's metrics row and its checkpoint: rows and checkpoints agree
    assert done < 400 and _epochs_logged(out) == list(range(done))
    resumed = _cli(["finetune", "--out", str(out), "--resume", "--quiet"], timeout=600)  # up to 400 epochs
    assert resumed.returncode == 0 and _epochs_logged(out) == list(range(400))


def _safe_rows(out):
    try:
        return bool(_epochs_logged(out))
    except (OSError, ValueError, KeyError):
        return False
