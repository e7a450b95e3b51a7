"""The GPU suite must run the first time a GPU is lent (its first run is where the GPU goals are judged): its shell
is valid, and every benchmark it calls exists and accepts the options it is given (argparse, no model built)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "benchmarks" / "gpu_suite.sh"


def test_gpu_suite_is_valid_and_calls_what_exists(monkeypatch):
    """`bash -n` passes; the suite calls exactly seven benchmark scripts that exist and accept every option given, each
    option a whole word of the usage (`--device` is not `--devices`) (`SCRIPT --help` run by runpy as `__main__` in the
    test's process, sys.path put back: was one fresh interpreter). [subprocess: bash -n]
    """
    assert subprocess.run(["bash", "-n", str(SUITE)]).returncode == 0
    text = SUITE.read_text().replace("\\\n", " ")
    calls = re.findall(r"^stage \S+ \d+ (tests/benchmarks/\S+\.py)(.*)$", text, flags=re.M)
    assert {Path(c[0]).name for c in calls} == {"predict.py", "explain.py", "finetune.py", "folder_decode.py",
                                                "play.py", "memory_plan.py", "concepts.py"}
    for script, _ in calls:
        assert (ROOT / script).is_file(), script
    # every script's --help, run as `python SCRIPT --help` runs it (runpy, as `__main__`), in this process: a fresh
    # interpreter only imported torch again; what the scripts change at import (sys.path) is put back
    usages = [_help(ROOT / script, monkeypatch) for script, _ in calls]
    for (script, rest), (code, usage) in zip(calls, usages, strict=True):
        assert code == 0, (script, usage[-500:])
        for option in (a for a in shlex.split(rest) if a.startswith("--")):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", usage), (script, option)  # not --devices


def _help(script: Path, monkeypatch) -> tuple[int, str]:
    """(exit code, what it printed) of `python SCRIPT --help`."""
    monkeypatch.setattr(sys, "argv", [str(script), "--help"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    text = io.StringIO()
    with contextlib.redirect_stdout(text), warnings.catch_warnings():  # concepts.py filters a warning in main()
        try:
            runpy.run_path(str(script), run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
    return code, text.getvalue()


def test_stages_over_the_budget_are_skipped_and_recorded(tmp_path):
    """A lease runs one command for at most 600 s: stages that no longer fit the suite's BUDGET are skipped, and
    gpu_suite.json (rewritten after every stage) still lists every stage with why.

    [subprocess]
    """
    import os

    env = {**os.environ, "BUDGET": "10", "SMOKE": "1", "DEVICE": "cpu", "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(SUITE), str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "gpu_suite.json").read_text())
    names = re.findall(r"^stage (\S+) \d+ ", SUITE.read_text(), flags=re.M)
    assert list(report["stages"]) == names and len(names) == 12
    assert all(s["exit"] == 125 and s["output"] == ["skipped: over the suite's budget"]
               for s in report["stages"].values())
    assert "skipped" in out.stdout
    # a lease brings back at most 8 files: the suite leaves two
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == ["gpu_suite.json", "gpu_suite.log"]
