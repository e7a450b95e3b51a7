"""The online hub path (download with progress, file-name fallback, a dropped connection) against a local
fake hub on 127.0.0.1 — no real network."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("fake_hub.py")


def _run(mode: str) -> dict:
    res = subprocess.run([sys.executable, str(SCRIPT), mode], capture_output=True, text=True, timeout=180,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_download_with_progress_then_loads():
    out = _run("safetensors")
    assert out["ok"] and out["same_logits"]
    assert "snapshots" in out["source"] and out["source"].endswith("model.safetensors)")
    done, total, message = out["progress"]
    assert done == total == out["size"] and "Downloading" in message  # the GUI's progress bar reaches 100 %
    assert out["requests"][-1] == "GET model.safetensors"


def test_falls_back_to_the_next_weight_file_name():
    out = _run("bin-only")
    assert out["ok"] and out["same_logits"] and out["source"].endswith("pytorch_model.bin)")
    assert "HEAD model.safetensors" in out["requests"]


@pytest.mark.timeout(200)
def test_dropped_connection_is_a_clear_error():
    out = _run("broken")
    assert not out["ok"] and "failed" in out["error"].lower()
