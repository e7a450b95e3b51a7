"""The GPU suite must run the first time a GPU is lent (its first run is where the GPU goals are judged): its shell
is valid, and every benchmark it calls exists and accepts the options it is given (argparse, no model built)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "benchmarks" / "gpu_suite.sh"


def test_gpu_suite_is_valid_and_calls_what_exists():
    assert subprocess.run(["bash", "-n", str(SUITE)]).returncode == 0
    text = SUITE.read_text().replace("\\\n", " ")
    calls = re.findall(r"^stage \S+ \d+ (tests/benchmarks/\S+\.py)(.*)$", text, flags=re.M)
    assert {Path(c[0]).name for c in calls} == {"predict.py", "explain.py", "finetune.py", "folder_decode.py"}
    for script, rest in calls:
        assert (ROOT / script).is_file(), script
        options = [a for a in shlex.split(rest) if a.startswith("--")]
        usage = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True,
                               cwd=ROOT, timeout=120)
        assert usage.returncode == 0, usage.stderr[-500:]
        for option in options:
            assert option in usage.stdout, (script, option)
