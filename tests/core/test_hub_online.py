"""The online hub path (download with progress, file-name fallback, a dropped connection) against a local
fake hub on 127.0.0.1 — no real network."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("fake_hub.py")


MODES = ("safetensors", "bin-only", "broken")


@pytest.fixture(scope="module")
def hub_runs() -> dict:
    """Every mode in one fresh interpreter (torch and timm load once; each mode has a cache of its own)."""
    res = subprocess.run([sys.executable, str(SCRIPT), *MODES], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr[-3000:]
    runs = [json.loads(line) for line in res.stdout.strip().splitlines() if line.startswith("{")]
    return {run["mode"]: run for run in runs}


def test_download_with_progress_then_loads(hub_runs):
    """Downloads model.safetensors with progress moving (more than one update) and reaching 100 %, loads with logits
    equal the served model. [subprocess]
    """
    out = hub_runs["safetensors"]
    assert out["ok"] and out["same_logits"]
    assert "snapshots" in out["source"] and out["source"].endswith("model.safetensors)")
    done, total, message = out["progress"]
    assert done == total == out["size"] and "Downloading" in message  # the GUI's progress bar reaches 100 %
    assert out["updates"] >= 2  # and moved on the way there
    assert out["requests"][-1] == "GET model.safetensors"


def test_falls_back_to_the_next_weight_file_name(hub_runs):
    """With only pytorch_model.bin served, falls back after HEAD model.safetensors and loads the same logits.
    [subprocess]
    """
    out = hub_runs["bin-only"]
    assert out["ok"] and out["same_logits"] and out["source"].endswith("pytorch_model.bin)")
    assert "HEAD model.safetensors" in out["requests"]


@pytest.mark.timeout(200)
def test_dropped_connection_is_a_clear_error(hub_runs):
    """A connection dropped mid-download (huggingface_hub resumes it until its retries run out, without its 1 s back-off
    before each: 5 s of sleep) is a ModelLoadError saying "failed". [subprocess]
    """
    out = hub_runs["broken"]
    assert not out["ok"] and "failed" in out["error"].lower()
