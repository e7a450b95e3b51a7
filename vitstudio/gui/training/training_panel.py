"""The Training panel: folder dataset → summary and class balance → base model and recipe → Start; live curves,
progress, pause/cancel, attention-over-training probe, results, run history, and "Use this model"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QScrollArea, QSplitter, QTabWidget, QVBoxLayout, QWidget

from vitstudio.app.model_files import models_dir
from vitstudio.app.run_curves import RunCurves, lr_note
from vitstudio.app.training_jobs import (
    FINISHED,
    UNFINISHED,
    EpochMetrics,
    EvalReport,
    HeadStart,
    ProbeSnapshot,
    RunWarning,
    StepProgress,
    gallery_job,
    run_status,
)
from vitstudio.core.files import counted
from vitstudio.core.jobs import Progress

from .. import workers
from ..common.bind import bind
from .augmentation_preview import AugmentationPreviewView
from .dataset_actions import DatasetActions
from .memory_plan_view import MemoryPlanView
from .probe_history import ProbeHistoryView
from .run_history import RunHistoryView
from .start_readiness import SCANNING, start_blocker
from .training_curves import TrainingCurvesView
from .training_dataset import TrainingDatasetWidget
from .training_form import TrainingFormWidget
from .training_results import RunResultsWidget
from .training_run_controls import RunControlsWidget


class TrainingPanel(QWidget):
    use_model = Signal(str)  # run folder
    export_requested = Signal(str)  # run folder
    explore_image = Signal(str, str)  # image path, the run folder whose model it belongs to
    run_ended = Signal(bool)  # the run in progress ended: True when it finished (or was cancelled), False: failed

    def __init__(self, app, catalog_names: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state = app.state
        self.run = app.training  # the run in progress (one at a time)
        self.run.record.connect(self._on_record)
        self.run.finished.connect(self._on_finished)
        self.run.failed.connect(self._on_failed)
        self.job = None
        # "The run shown" (curves, results, probe on screen) and "the run in progress" are separate: History can
        # show an old run while another trains; the live run keeps its own buffers and is redrawn when shown.
        # The run shown and the dataset are the view's requests: a gallery made for another run, a scan or an
        # augmentation preview of another folder is never drawn.
        self.view_state = app.training_state
        self.jobs = workers.ViewJobs(self.view_state, {"gallery": ("run",), "scan": ("dataset",),
                                                       "preview": ("dataset",)}, long=("scan",))
        self.active_run: Path | None = None
        self.run_at_dataset: Path | None = None  # the run shown when the dataset being scanned was chosen
        self.warned_run: Path | None = None  # the run the controls' warnings are of (the last one started here)
        self.said: dict[str, str] = {}  # the latest text of each kind of run warning told the user
        self.shown = RunCurves()  # the curves of the run shown
        self.live: RunCurves | None = None  # the run in progress's, drawn while it is the run shown
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self._build_setup_column(catalog_names))
        split.addWidget(self._build_run_views())
        split.setStretchFactor(1, 1)
        QVBoxLayout(self).addWidget(split)
        # choose, scan and summarise the dataset, name the run, preview the augmentation (folders dropped on the tab)
        self.dataset_actions = DatasetActions(self.dataset, self.form, self.preview_box, self.right, self.jobs,
                                              self.view_state, state, self)
        self.dataset_actions.changed.connect(self._on_dataset)
        self.dataset_actions.replaced.connect(self._forget_shown_run)  # a path that cannot be used replaces nothing
        self.view_state.events.dataset.connect(self._note_run_shown_at_dataset)
        self.dataset_actions.said.connect(self.controls.status.setText)
        self.controls.preview_button.clicked.connect(self.dataset_actions.preview_augmentation)
        vs = self.view_state  # what the next run starts from: fields, each control bound to its own
        bind(self.dataset.base_model, vs, "base_model")
        bind(self.dataset.run_name, vs, "run_name", live=True)  # "already exists" is said as the name is typed
        bind(self.dataset.probe, vs, "probe")
        bind(self.controls.multi_gpu, vs, "multi_gpu")
        vs.events.base_model.connect(self._on_base_model)
        self.form.follow_base_model(vs.base_model or "")
        for changed in (self.form.changed, self.memory_plan.settled, vs.events.run_name):
            changed.connect(self._say_readiness)
        for changed in (self.form.changed, self.dataset_actions.changed):
            changed.connect(self.memory_plan.request)
        self._refresh_buttons()
        self.refresh_history()
        state.model_loaded.connect(self._on_model_loaded)

    @property
    def shown_run(self) -> Path | None:
        return self.view_state.run

    @shown_run.setter
    def shown_run(self, folder: Path | None) -> None:
        self.view_state.update(run=folder)

    def _note_run_shown_at_dataset(self, _dataset) -> None:
        self.run_at_dataset = self.shown_run  # what the dataset, once scanned, replaces

    def _forget_shown_run(self, _dataset) -> None:
        """Another usable dataset: no earlier run's accuracy, warnings, progress or confusion axes stay (a live one
        does, and one picked in History while the dataset was scanned)."""
        if self.shown_run == self.run_at_dataset and not (self.running and self._showing_live()):
            self.shown_run = None
            self._show_curves(RunCurves())
            self.controls.show_no_run()

    def set_dataset(self, folder: str, exclude: list | None = None) -> None:
        """Train on `folder` (a labels file too), leaving `exclude` out (the folder view's label review)."""
        self.dataset_actions.set_dataset(folder, exclude)

    def _on_dataset(self) -> None:
        self._say_readiness(always=True)  # what the dataset's new state means, said in any case

    def _say_readiness(self, *_changed, always: bool = False) -> None:
        """Start, and the status line, say at once why a run cannot start (or that it now can)."""
        self._refresh_buttons()
        if not self.running and self.dataset_actions.problem != SCANNING:
            self.controls.say_readiness(self._start_blocker(), always)

    def _on_model_loaded(self, model) -> None:
        self.view_state.follow_loaded(model.name)

    def _on_base_model(self, spec: str | None) -> None:
        self.form.follow_base_model(spec or "")
        self.memory_plan.request()
        self._say_readiness()

    # -- construction --------------------------------------------------------------------------------
    def _build_setup_column(self, catalog_names: list[str]) -> QWidget:
        """Dataset, base model and recipe in a scrolling column; the memory plan and the run controls pinned under
        it, on screen however far the form is scrolled (a 720 px screen)."""
        self.dataset = TrainingDatasetWidget(catalog_names)  # folder, summary, balance, base model, run name, probe
        self.form = TrainingFormWidget()
        self.memory_plan = MemoryPlanView(self._run_config)  # what the settings will take on the device
        self._build_run_controls()
        form_inner = QWidget()
        side = QVBoxLayout(form_inner)
        side.addWidget(self.dataset)
        side.addWidget(self.form)
        side.addStretch(1)
        form_area = QScrollArea()  # the advanced settings are long; the column scrolls instead of squeezing
        form_area.setWidget(form_inner)
        form_area.setWidgetResizable(True)
        form_area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        form_area.setMinimumHeight(160)
        left = QWidget()
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(form_area, 1)
        column.addWidget(self.memory_plan)
        column.addWidget(self.controls)
        left.setMinimumWidth(360)  # with the run views' ~440: the tab fits beside the strip and card at 1280 px
        left.setMaximumWidth(460)
        return left

    def _build_run_controls(self) -> None:
        """Start / Pause / Cancel / Resume, the multi-GPU switch, progress, status and "Use this model"."""
        import torch

        self.gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        self.controls = RunControlsWidget(self.gpus)
        self.controls.resume_button.clicked.connect(self.resume_run)
        self.controls.start_button.clicked.connect(self.start)
        self.controls.pause_button.toggled.connect(self._on_pause)
        self.controls.cancel_button.clicked.connect(self.cancel)
        self.controls.use_button.clicked.connect(self._use_shown_run)
        self.controls.export_button.clicked.connect(lambda: self.export_requested.emit(str(self.shown_run)))

    def _build_run_views(self) -> QWidget:
        """Curves, attention over training, results and history of the run shown."""
        self.curves = TrainingCurvesView()
        self.lines = self.curves.lines
        self.probe_history = ProbeHistoryView(self.state)
        self.probe_view, self.animation_button = self.probe_history.view, self.probe_history.animation_button
        self.results = RunResultsWidget()
        # a run's results are explained by that run's model, not whatever is loaded
        self.results.misclassified_clicked.connect(
            lambda path: self.explore_image.emit(path, str(self.view_state.run or "")))
        self.preview_box = AugmentationPreviewView()
        self.preview = self.preview_box.plot
        self.history_view = RunHistoryView()
        self.history = self.history_view.list
        self.history_view.run_clicked.connect(self.show_run)
        self.right = QTabWidget()
        for w, title in ((self.curves, "Curves"), (self.probe_history, "Probe"),
                         (self.results, "Results"), (self.preview_box, "Augmentation"), (self.history_view, "History")):
            self.right.addTab(w, title)
        self.right.setTabToolTip(1, "Attention over training: the probe image's rollout after each epoch")
        return self.right

    # -- running -----------------------------------------------------------------------------------
    def start(self) -> None:
        blocker = self._start_blocker()
        if blocker:
            self.controls.status.setText(blocker)
            return
        if not self.view_state.run_name:
            self.dataset_actions.name_next_run()
        self._launch(self._run_config(), resume=False)

    def _base_model(self) -> str:
        return self.view_state.base_model or (self.state.model.name if self.state.model else "")

    def _run_config(self):
        """The TrainConfig Start would run (a ValueError names a setting typed wrongly)."""
        data = self.dataset_actions
        return self.form.config(str(data.scan.source), self._base_model(),
                                str(models_dir() / (self.view_state.run_name or "run")),
                                probe_image=self.view_state.probe, exclude=tuple(data.exclude))

    def _start_blocker(self) -> str:
        return start_blocker(self.running, self.dataset_actions.problem, self._base_model(),
                             self.view_state.run_name or "", self._run_config, self.memory_plan.problem())

    def resume_run(self) -> None:
        """Continue the unfinished run selected in History (cancelled, interrupted or killed) from its last
        checkpoint; one with no finished epoch starts over under the same name."""
        if self.shown_run is None or not self._resumable(self.shown_run):
            self.controls.status.setText("Select an unfinished run in History first.")
            return
        from vitstudio.app.training_jobs import RunFileError, read_train_config

        try:
            config = read_train_config(self.shown_run)  # the run selected, even renamed or copied
        except RunFileError as exc:  # a damaged run file, named
            self.controls.status.setText(str(exc))
            return
        self._launch(config, resume=True)

    def _launch(self, config, resume: bool) -> None:
        self.shown_run = self.active_run = self.warned_run = Path(config.out_dir)
        self.controls.start_warnings()
        self.right.setCurrentWidget(self.curves)  # the new run's curves, not "No results yet" of Results
        self.live = RunCurves.read(self.active_run) if resume else RunCurves()
        self.live.lr_note = lr_note(config.opt)  # the quick preset's L-BFGS has no schedule: said, not drawn
        self._show_curves(self.live)
        self.controls.status.setText(f"{'Resuming' if resume else 'Starting'} {self.active_run.name}…")
        self.job = self.run.start(config, resume, self.gpus if self.view_state.multi_gpu else None)
        if resume:  # the run name says the run training, the one resumed (the next run is named when it ends)
            self.view_state.run_name = self.active_run.name
        self._refresh_buttons()

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.controls.status.setText("Cancelling… the last finished epoch is kept: pick the run in History and "
                                         "press Resume run to continue it.")

    def _on_pause(self, paused: bool) -> None:
        if self.job is None:
            return
        (self.job.cancel_token.pause if paused else self.job.cancel_token.resume)()
        self.controls.show_paused(paused)
        self._update_live_row()

    @property
    def running(self) -> bool:
        return self.job is not None and not self.job.done

    def _showing_live(self) -> bool:
        return self.active_run is not None and self.shown_run == self.active_run

    def _refresh_buttons(self) -> None:
        """Start/Pause/Cancel follow the run in progress; Resume/Use follow the run shown."""
        running, shown = self.running, self.shown_run
        resumable = not running and shown is not None and self._resumable(shown)
        usable = shown is not None and (shown / "config.json").exists()
        self.controls.refresh(running, resumable, usable and not (running and self._showing_live()),
                              start_blocker=self._start_blocker(), preview_blocker=self.dataset_actions.problem)

    @staticmethod
    def _resumable(folder: Path) -> bool:
        return (folder / "train_config.json").is_file() and run_status(folder) in UNFINISHED

    def _use_shown_run(self) -> None:
        if self.shown_run is not None:
            self.use_model.emit(str(self.shown_run))

    def _show_curves(self, curves: RunCurves) -> None:
        """Draw `curves` (the live run's or another's: the object itself, so the live one grows on screen)."""
        self.shown = curves
        self.curves.clear_curves()
        self.results.show_report(None)
        self._draw_curves()
        self.curves.draw_lr(curves.lr, curves.lr_note)

    def _on_record(self, rec) -> None:
        """A record of the run in progress: progress and status always, curves only while that run is shown."""
        live, showing = self.live, self._showing_live()
        if isinstance(rec, StepProgress):
            self.controls.show_step(rec, None if showing else self.active_run.name)
            live.add_step(rec, self.active_run)
            if showing:
                self.curves.draw_lr(live.lr)
        elif isinstance(rec, EpochMetrics):
            live.add_epoch(rec)
            if showing:
                self._draw_curves()
            if self.active_run is not None and str(self.active_run) not in self.history_view.listed:
                self.refresh_history()  # the run in progress is listed (and can be shown again) from its first epoch
            self._update_live_row()
        elif isinstance(rec, HeadStart):
            live.head_start = rec
            if showing:
                self._draw_curves()
        elif isinstance(rec, ProbeSnapshot):
            live.snapshots.append(rec)
            if showing:
                self._show_last_snapshot()
        elif isinstance(rec, RunWarning):
            self.controls.show_warning(rec.message, rec.kind)
            if not rec.update:
                self.state.message.emit("warning", rec.message)
            elif rec.kind in self.said:  # its figures moved on: not logged again, but not left stale on screen
                self.state.message_updated.emit(self.said[rec.kind], rec.message)
            self.said[rec.kind] = rec.message
        elif isinstance(rec, Progress) and rec.message:
            self.controls.show_progress(rec)

    def _draw_curves(self) -> None:
        self.curves.draw_epochs(self.shown.epochs)
        self.curves.draw_start(self.shown.head_start)

    def _show_last_snapshot(self) -> None:
        self.probe_history.show_snapshots(self.shown.snapshots, self.shown_run)

    def _on_finished(self, result) -> None:
        showing = self._showing_live()
        self.active_run = None
        bar = self.controls.progress
        bar.setValue(bar.maximum() if result.status in FINISHED else bar.value())
        bar.setFormat(f"{result.status} · {result.epochs_done} epochs")  # not the last step's message
        skipped = f"; {len(result.skipped)} file(s) skipped (see the log)" if result.skipped else ""
        self.controls.status.setText(f"{result.status}: {result.accuracy_name} {result.best_val_acc * 100:.2f} %"
                                     f"{result.kept} after {result.epochs_done} epochs → {result.out_dir}{skipped}")
        for path, why in result.skipped.items():
            self.state.message.emit("warning", f"skipped {path}: {why}")
        self.dataset_actions.name_next_run()
        self.refresh_history()
        if result.report is not None and showing:
            self._show_results(result.report)
        self._refresh_buttons()
        self.run_ended.emit(True)

    def _show_results(self, report: EvalReport, switch: bool = True) -> None:
        self.results.show_report(report)  # at once; thumbnails follow from a worker, while this run is shown
        self.jobs.start("gallery", "Gallery", gallery_job, report, on_result=self._show_gallery)
        if switch:
            self.right.setCurrentWidget(self.results)

    def _show_gallery(self, found: tuple[EvalReport, dict]) -> None:
        self.results.show_thumbnails(*found)

    def _on_failed(self, exc: BaseException) -> None:
        message = workers.describe(exc)
        self.active_run = None
        if self.view_state.run_name and (models_dir() / self.view_state.run_name).exists():
            self.dataset_actions.name_next_run()  # the failed run's folder stays: its name is taken
        self._refresh_buttons()
        self.controls.show_failed(message)
        self.state.report(exc, "Training failed")
        self.run_ended.emit(False)

    # -- history -----------------------------------------------------------------------------------
    def refresh_history(self) -> None:
        self.history_view.refresh(self.active_run, self.shown_run)

    def _update_live_row(self) -> None:
        """The History line of the run in progress: its epochs and best accuracy so far, paused or training."""
        if self.active_run is None:
            return
        paused = self.controls.pause_button.isChecked()
        self.history_view.update_row(self.active_run, "paused" if paused else "training…", self.live.done,
                                     self.live.best_val_acc)

    def show_run(self, folder: Path) -> None:
        """Show `folder`'s curves and results; the run in progress (if any) goes on and keeps its own buffers."""
        self.shown_run = folder
        self.controls.show_warnings_of_shown_run(folder == self.warned_run)
        if self._showing_live():
            self._show_curves(self.live)
        else:
            self._show_curves(RunCurves.read(folder))  # attention over training replayed from the folder too
            eval_file = folder / "eval.json"
            if eval_file.exists():
                self._show_results(EvalReport.from_json(json.loads(eval_file.read_text())), switch=False)
            if not self.running:
                self.controls.status.setText(f"Run {folder.name}: use it, or look at its curves and results.")
                self._show_run_progress(folder)
        self._show_last_snapshot()
        self._refresh_buttons()

    def _show_run_progress(self, folder: Path) -> None:
        """The bar says the shown run's state, not the last run trained here ("finished · 4 epochs" of another)."""
        status = run_status(folder)
        self.controls.progress.setRange(0, 1)
        self.controls.progress.setValue(1 if status in FINISHED else 0)
        self.controls.progress.setFormat(f"{folder.name}: {status} · {counted(self.shown.done, 'epoch')}")

    def export_data(self):
        """The curves of the run shown (epochs × columns), or its confusion matrix when Results is on screen."""
        if self.shown_run is None:
            return None
        report = self.results.report
        if self.right.currentWidget() is self.results and report is not None:
            return "confusion", report.confusion, {"run": str(self.shown_run), "classes": list(report.classes),
                                                   "rows": "true class", "columns": "predicted class"}
        table = self.shown.table()
        if table is None:
            return None
        columns, rows = table
        return "curves", np.array(rows, dtype=np.float32), {"run": str(self.shown_run), "columns": columns}
