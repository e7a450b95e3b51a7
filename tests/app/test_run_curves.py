"""The Training tab's curves as a Qt-free model: a run folder read back, and the records of a run in progress
added, each into its own RunCurves (the live run's buffers are never the shown run's)."""

from __future__ import annotations

import csv
import json

from vitstudio.app.run_curves import NO_SCHEDULE, RunCurves
from vitstudio.core.fields import EPOCH_CURVES, METRIC_FIELDS
from vitstudio.core.train.engine import EpochMetrics, StepProgress


def _run(folder, opt, rows):
    folder.mkdir()
    (folder / "train_config.json").write_text(json.dumps({"opt": opt, "lr": rows[0][5]}))
    with open(folder / "metrics.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(METRIC_FIELDS)
        writer.writerows(rows)
    return folder


def test_a_run_folder_reads_back_as_its_metrics_file_holds_it(tmp_path):
    """A run folder's curves equal its metrics.csv read with csv.DictReader (epochs 1-based, each figure, the best val
    accuracy, the export table); an L-BFGS run says there is no schedule; no epochs, no table.
    """
    rows = [(e, 1.0 / (e + 1), 0.5 + e / 10, 1.1 / (e + 1), 0.4 + e / 10, 1e-3 / (e + 1), 2.0) for e in range(3)]
    curves = RunCurves.read(_run(tmp_path / "probe", "adamw", rows))
    with open(tmp_path / "probe" / "metrics.csv") as fh:
        written = list(csv.DictReader(fh))
    assert curves.epochs["epoch"] == [1, 2, 3] and curves.done == 3 and curves.lr_note is None
    for name in EPOCH_CURVES:
        assert curves.epochs[name] == [float(row[name]) for row in written]
    assert curves.best_val_acc == max(float(row["val_acc"]) for row in written)
    columns, table = curves.table()
    assert columns == ["epoch", *EPOCH_CURVES] and table[1] == [2, *(float(written[1][n]) for n in EPOCH_CURVES)]
    assert RunCurves.read(_run(tmp_path / "quick", "lbfgs", rows)).lr_note == NO_SCHEDULE  # no schedule to draw
    assert RunCurves().table() is None


def test_a_live_runs_records_grow_its_own_curves_only(tmp_path):
    """Steps and an epoch of a run in progress grow its RunCurves (lr per step, figures per epoch), never another's."""
    shown, live = RunCurves(), RunCurves()
    for step in range(4):
        live.add_step(StepProgress(epoch=0, epochs=1, step=step + 1, steps=4, loss=1.0, lr=0.1 * (step + 1),
                                   img_per_s=10.0, eta_s=1.0), tmp_path)
    live.add_epoch(EpochMetrics(epoch=0, train_loss=1.0, train_acc=0.5, val_loss=1.2, val_acc=0.4, lr=0.4,
                                seconds=1.0, best=True))
    assert [(e, round(r, 6)) for e, r in live.lr] == [(0.25, 0.1), (0.5, 0.2), (0.75, 0.3), (1.0, 0.4)]
    assert live.epochs == {"epoch": [1], "train_loss": [1.0], "train_acc": [0.5], "val_loss": [1.2], "val_acc": [0.4]}
    assert shown.done == 0 and shown.lr == [] and live.best_val_acc == 0.4
