"""Launch a multi-process (multi-GPU) fine-tuning run as a `torchrun` subprocess and follow it from its run folder.

The GUI uses this when more than one GPU is present: the run itself is the same engine under DDP
(`python -m torch.distributed.run --nproc-per-node N -m vitstudio finetune --config FILE`); progress is read from
the metrics.csv that rank 0 appends after every epoch.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from vitstudio.core.fields import METRIC_FIELDS
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.train.engine import EpochMetrics, TrainResult
from vitstudio.core.train.evaluation import EvalReport
from vitstudio.core.train.recipes import TrainConfig
from vitstudio.core.train.runs import read_metrics


def torchrun_command(config_file: Path, processes: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes),
            "-m", "vitstudio", "finetune", "--config", str(config_file), "--quiet"]


def run_torchrun(config: TrainConfig, processes: int, cancel: CancelToken | None = None,
                 poll_s: float = 0.5) -> Iterator:
    """Generator: yields Progress and EpochMetrics as the run advances, returns a TrainResult."""
    cancel = cancel or CancelToken()
    config.validate()
    out = Path(config.out_dir)
    if out.exists():
        raise FileExistsError(f"{out} already exists; runs are never overwritten.")
    config_file = Path(tempfile.mkdtemp(prefix="vitstudio-run-")) / "train_config.json"
    config_file.write_text(config.to_json())
    log_file = config_file.with_name("torchrun.log")
    with log_file.open("w") as log:
        proc = subprocess.Popen(torchrun_command(config_file, processes), stdout=log, stderr=subprocess.STDOUT)
    yield Progress(0, config.epochs, f"Started {processes} processes (torchrun)")
    reported, best = 0, -1.0
    while True:
        finished = proc.poll() is not None
        rows = read_metrics(out)
        for row in rows[reported:]:
            improved = row["val_acc"] > best
            best = max(best, row["val_acc"])
            figures = {k: row[k] for k in METRIC_FIELDS}
            yield EpochMetrics(**{**figures, "epoch": int(figures["epoch"])}, best=improved)
            reported += 1
            yield Progress(reported, config.epochs, f"Epoch {reported}/{config.epochs} done")
        if finished:
            break
        if cancel.cancelled:
            proc.terminate()  # torchrun forwards SIGTERM to its workers; the last checkpoint stays
            proc.wait(30)
            break
        time.sleep(poll_s)
    status_file = out / "status.json"
    status = json.loads(status_file.read_text()) if status_file.exists() else {}
    if proc.returncode not in (0, None) and not cancel.cancelled:
        tail = log_file.read_text()[-2000:]
        raise RuntimeError(f"The torchrun run failed (exit {proc.returncode}):\n{tail}")
    eval_file = out / "eval.json"
    report = EvalReport.from_json(json.loads(eval_file.read_text())) if eval_file.exists() else None
    return TrainResult(out, status.get("status", "cancelled" if cancel.cancelled else "unknown"),
                       int(status.get("epochs_done", reported)), float(status.get("best_val_acc", -1.0)), report,
                       dict(status.get("skipped", {})), int(status.get("best_epoch", -1)),
                       dict(status.get("ignored", {})))
