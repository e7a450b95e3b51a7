"""The Training tab as the new user's walk met it (issue 49): the quick preset's preview shows what its run fits
on, a finished run's results outlive a dataset path that cannot be used, the run buttons keep their place while a
run starts and ends, and a resumed run is named as the run it resumes. Runs are folders written here (no
training)."""

from __future__ import annotations

import json
import threading

import numpy as np
from PySide6.QtCore import QPoint

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset
from vitstudio.core.train.evaluation import EvalReport
from vitstudio.gui.training.training_panel import TrainingPanel


def _run_folder(folder, status: str):
    """A run folder as a run leaves it: its status, its settings, and (finished) its evaluation."""
    from vitstudio.core.train.recipes import make_config

    folder.mkdir(parents=True)
    config = make_config(str(folder.parent / "data"), TINY_SPEC, str(folder), "scratch")
    (folder / "train_config.json").write_text(config.to_json())
    (folder / "status.json").write_text(json.dumps({"status": status, "epochs_done": 1}))
    if status == "finished":
        report = EvalReport(("ants", "bees"), np.array([[3, 1], [0, 4]]), (), ())
        (folder / "eval.json").write_text(json.dumps(report.to_json()))
    return folder


def test_the_quick_presets_preview_shows_the_crops_its_head_is_fitted_on(panel, qtbot, tmp_path):
    """The form said "no augmentation" for the quick preset while its preview showed random crops of 8-100 %: its
    views are each image's crop as the model sees it, whose features the quick run fits its head on.

    With the quick preset, every tile of "Preview augmentation" is some training image's crop as the model sees it
    (`LoadedModel.crop`, what its cached features come from) and the line says no augmentation (it showed random crops
    of 8–100 %). [panel]
    """
    from vitstudio.core.data.images import read_image

    panel = panel(TrainingPanel, model=TINY_SPEC)
    panel.set_dataset(str(make_dataset(tmp_path / "data", per_class=3, size=48)))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    panel.form.preset.setCurrentText("quick")
    panel.dataset_actions.preview_augmentation()
    qtbot.waitUntil(lambda: panel.dataset_actions.preview_grid is not None, timeout=20000)
    model, scan = panel.state.model, panel.dataset_actions.scan
    crops = [np.asarray(model.crop(read_image(p))) for files in scan.train.values() for p in files]
    (h, w), pad, grid = crops[0].shape[:2], 3, panel.dataset_actions.preview_grid
    tiles = [grid[pad + r * (h + pad):pad + r * (h + pad) + h, pad + c * (w + pad):pad + c * (w + pad) + w]
             for r in range(4) for c in range(4)]
    assert all(any(np.array_equal(tile, crop) for crop in crops) for tile in tiles)
    assert "no augmentation" in panel.preview_box.label.text()


def test_a_dataset_path_that_cannot_be_used_leaves_the_run_shown(panel, qtbot, tmp_path):
    """A mistyped dataset path hid the finished run's Results; only another usable dataset replaces them (not a
    run picked while it was scanned).

    A dataset path that cannot be used keeps the finished run shown, its Results and its bar; another usable dataset
    replaces them (a mistyped path hid them), but not a run picked in History while that dataset was being scanned.
    [panel]
    """
    panel = panel(TrainingPanel)
    run = _run_folder(tmp_path / "run", "finished")
    panel.show_run(run)
    assert panel.results.report is not None
    panel.set_dataset(str(tmp_path / "no such folder"))
    qtbot.waitUntil(lambda: "cannot be used" in panel.dataset_actions.problem, timeout=10000)
    assert panel.shown_run == run and panel.results.report is not None
    assert panel.results.report.classes == ("ants", "bees") and "finished" in panel.controls.progress.format()
    panel.set_dataset(str(make_dataset(tmp_path / "data", per_class=2, size=8)))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    assert panel.shown_run is None and panel.results.report is None
    panel.set_dataset(str(make_dataset(tmp_path / "more", per_class=2, size=8)))
    panel.show_run(run)  # picked in History while the dataset is scanned: it stays
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    assert panel.shown_run == run and panel.results.report is not None


def test_the_run_buttons_keep_their_place_as_a_run_starts_and_ends(panel, qtbot):
    """Start, Pause, Cancel and Resume jumped 15-40 px as the status line grew to a run's two or three lines, a
    warning came and Pause became Continue.

    Start, Pause, Cancel and Resume keep their position and size while the status grows to several lines, a warning and
    Paused appear, Pause reads Continue, and the run ends (they jumped 15–40 px). [panel]
    """
    panel = panel(TrainingPanel)
    panel.resize(1100, 640)
    controls = panel.controls
    c = panel.controls
    buttons = (c.start_button, c.pause_button, c.cancel_button, c.resume_button)

    def places():
        qtbot.wait(1)  # the layouts settle
        return [(b.mapTo(panel, QPoint(0, 0)).toTuple(), b.size().toTuple()) for b in buttons]

    idle = places()
    controls.refresh(running=True, resumable=False, usable=False)
    panel.controls.status.setText("loss 0.6931 · lr 1.00e-03 · 812.4 img/s · ETA 0m42s " * 4)  # three lines or more
    controls.show_warning("Validation accuracy is at chance level after 2 epochs " * 3, "chance")
    controls.show_paused(True)
    c = panel.controls
    assert c.pause_button.text() == "Continue" and c.status.height() > 2 * panel.fontMetrics().height()
    assert places() == idle
    controls.refresh(running=False, resumable=True, usable=True)
    panel.controls.status.setText("finished: best val accuracy 56.90 % after 7 epochs → /home/someone/models/a-run")
    assert places() == idle


def test_a_resumed_run_is_named_as_the_run_it_resumes(panel, qtbot, tmp_path, monkeypatch):
    """History → Resume run trained the run selected while the run name still said a fresh name.

    History → Resume run shows the resumed run's name in the run name while it trains (a fresh name was shown), and a
    fresh name once it ends (the training job is the test's). [panel]
    """
    from vitstudio.core.train import engine
    from vitstudio.core.train.engine import TrainResult

    held = threading.Event()

    def fine_tune(config, cancel, resume):  # the run, held until the test has read the name
        held.wait(10)
        return TrainResult(config.out_dir, "cancelled", 1, 0.5, None)
        yield

    monkeypatch.setattr(engine, "fine_tune", fine_tune)  # what the app layer's training job runs
    panel = panel(TrainingPanel)
    run = _run_folder(tmp_path / "ants-and-bees-3", "cancelled")
    panel.show_run(run)
    assert panel.controls.resume_button.isEnabled()
    panel.controls.resume_button.click()
    assert panel.running and panel.dataset.run_name.text() == "ants-and-bees-3"
    held.set()
    qtbot.waitUntil(lambda: panel.job.done and not panel.running, timeout=10000)
    assert panel.dataset.run_name.text() != "ants-and-bees-3"  # the next run gets a name of its own


def test_one_group_of_copies_is_said_in_the_singular(tmp_path):
    """"2 files are exact copies of each other (1 groups)": the dataset line and the run's warning count groups.

    One pair of exact copies reads "(1 group)" in the dataset line and in the run's split warning ("1 groups": the
    walk).
    """
    import shutil

    from vitstudio.core.data.datasets import exact_duplicate_groups, scan_dataset
    from vitstudio.core.train.recipes import make_config
    from vitstudio.core.train.training_data import prepare_split
    from vitstudio.gui.training.training_form import describe_scan

    data = make_dataset(tmp_path / "data", per_class=3, size=8)
    first = sorted((data / "red").iterdir())[0]
    shutil.copy(first, first.with_name("copy.png"))
    scan = scan_dataset(str(data))
    assert "2 files are exact copies of each other (1 group):" in describe_scan(scan, exact_duplicate_groups(scan), 0)
    config = make_config(str(data), TINY_SPEC, str(tmp_path / "run"), "scratch")
    warnings = prepare_split(config, tmp_path / "run")[3]
    assert any("2 files are exact copies of each other (1 group);" in w for w in warnings), warnings
