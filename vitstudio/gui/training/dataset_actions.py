"""The Training panel's dataset side, a controller with its collaborators named: choose a folder (browse, type or
drop), scan it on a worker, show its summary, name the next run, and preview the augmentation on its images. Each
state of the dataset (none, scanning, unreadable, ready) replaces the status it left behind: `changed` tells the
panel, which refreshes Start and its status line."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtWidgets import QTabWidget, QWidget

from vitstudio.app.model_files import models_dir
from vitstudio.app.training_jobs import preview_job, scan_job
from vitstudio.gui import file_dialogs

from .. import workers
from .augmentation_preview import AugmentationPreviewView
from .start_readiness import NO_DATASET, SCANNING, fresh_run_name
from .training_dataset import TrainingDatasetWidget
from .training_form import TrainingFormWidget, describe_scan


class DatasetActions(QObject):
    """What the dataset holds (`scan`), why it cannot be trained on (`problem`, "" once a scan succeeded), the files
    the folder view's label review left out (`exclude`) and the run name given here (`auto_name`, renewed with the
    dataset and the preset; one the user typed stays)."""

    changed = Signal()  # the dataset's state changed
    replaced = Signal(str)  # another usable dataset took the last one's place (a folder that cannot be used does not)
    said = Signal(str)  # a line for the panel's status (the preview asked for without a dataset, a bad setting)

    def __init__(self, widget: TrainingDatasetWidget, form: TrainingFormWidget, preview: AugmentationPreviewView,
                 views: QTabWidget, jobs: workers.ViewJobs, view_state, state, drop_target: QWidget) -> None:
        """`widget`: folder, summary, class balance, run name; `form`: the recipe (its preset names the run, its
        settings make the preview); `preview` shown in `views`; the panel's `jobs` ("scan", "preview") keyed by
        `view_state`'s dataset; `state`: the app's (the model's input size); folders dropped on `drop_target`."""
        super().__init__(drop_target)
        self.widget, self.form, self.preview, self.views = widget, form, preview, views
        self.jobs, self.view_state, self.state = jobs, view_state, state
        self.scan = None
        self.problem = NO_DATASET
        self.exclude: list[str] = []
        self.auto_name = ""
        self.preview_grid = None
        self.usable: str | None = None  # the last folder scanned that a run can use
        widget.browse_button.clicked.connect(self.browse)
        widget.folder.editingFinished.connect(self._typed)
        form.state.events.preset.connect(self._rename_unnamed_run)  # the field, not its combo
        drop_target.setAcceptDrops(True)
        drop_target.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        """A folder dropped anywhere on the panel becomes the dataset."""
        if event.type() == QEvent.DragEnter and event.mimeData().hasUrls():
            event.acceptProposedAction()
            return True
        if event.type() == QEvent.Drop:
            folders = [u.toLocalFile() for u in event.mimeData().urls() if Path(u.toLocalFile()).is_dir()]
            if folders:
                self.set_dataset(folders[0])
                event.acceptProposedAction()
                return True
        return False

    def browse(self) -> None:
        folder = file_dialogs.choose_folder(self.widget, "Dataset folder (one subfolder per class)")
        if folder:
            self.set_dataset(folder)

    def _typed(self) -> None:
        """Return, or the field left. The same folder again is not scanned (Browse… or a drop rescans it): leaving
        the field by a click on Start would otherwise rescan it, and Start, disabled meanwhile, swallow the click."""
        folder = self.widget.folder.text()
        if folder == self.view_state.dataset and self.problem in ("", SCANNING):
            return
        self.set_dataset(folder)

    def set_dataset(self, folder: str, exclude: list | None = None) -> None:
        """Scan `folder`; `exclude` (from the folder view's label review) is left out of the runs started here."""
        if not folder:
            return
        self.exclude = list(exclude or [])
        self.widget.folder.setText(folder)
        self.widget.dataset_info.setText("Scanning…")
        self.preview.clear("“Preview augmentation” shows 16 training views of this dataset.")
        self.preview_grid = None
        self.scan, self.problem = None, SCANNING
        self.changed.emit()
        self.view_state.update(dataset=folder)
        self.jobs.start("scan", "Scanning dataset", scan_job, folder, on_result=self._on_scan,
                        on_error=self._on_scan_error)

    def _on_scan_error(self, exc: BaseException) -> None:
        self.scan = None
        self.problem = f"This dataset folder cannot be used: {workers.describe(exc)}"
        self.widget.dataset_info.setText(f"<b>Cannot use this folder:</b> {workers.describe(exc)}")
        self.widget.balance.clear()
        self.changed.emit()

    def _on_scan(self, found) -> None:
        scan, copies = found
        self.scan = scan
        if self.view_state.dataset != self.usable:
            self.usable = self.view_state.dataset
            self.replaced.emit(self.usable)
        self.widget.dataset_info.setText(describe_scan(scan, copies, len(self.exclude)))
        self.widget.show_balance(scan.counts)
        # what the run would refuse at once, Start refuses now
        self.problem = (f"Class(es) with fewer than 2 images cannot be split into train and val: "
                        f"{', '.join(scan.too_small)}. Add images to them or move them out of the folder."
                        if scan.too_small else "")
        if not self.view_state.run_name or self.view_state.run_name == self.auto_name:
            self.name_next_run()
        self.changed.emit()

    def name_next_run(self) -> None:
        """A fresh run name (a finished run's name is taken: the next Start must not fail on it)."""
        root = self.scan.root if self.scan is not None else "run"
        self.auto_name = fresh_run_name(root, self.form.state.preset)
        self.view_state.run_name = self.auto_name

    def _rename_unnamed_run(self, _preset: str) -> None:
        """The name given here says the preset: it follows the preset (one the user typed stays)."""
        if self.scan is not None and self.view_state.run_name == self.auto_name:
            self.name_next_run()

    def preview_augmentation(self) -> None:
        """16 augmented training views with the form's settings, computed on a worker, shown in a grid."""
        if self.scan is None:
            self.said.emit(self.problem)
            return
        try:
            config = self.form.config(str(self.scan.source), "preview", str(models_dir() / ".preview"))
            config.validate()
        except ValueError as exc:
            self.said.emit(str(exc))
            return
        model = self.state.model
        size = (config.img_size, config.img_size) if config.img_size else (model.input_hw if model else (224, 224))
        interpolation = model.data_config.get("interpolation", "bicubic") if model else "bicubic"
        crop_pct = model.data_config.get("crop_pct") if model else None
        paths = [p for files in self.scan.train.values() for p in files]
        self.preview.label.setText("Computing augmented views…")
        self.jobs.start("preview", "Augmentation preview", preview_job, paths, config, size, interpolation,
                        crop_pct, on_result=self._show_preview, on_error=self._on_preview_error)
        self.views.setCurrentWidget(self.preview)

    def _on_preview_error(self, exc: BaseException) -> None:
        self.preview.label.setText(workers.describe(exc))

    def _show_preview(self, grid) -> None:
        self.preview.show_grid(grid, self.form.config("", "", ""))
        self.preview_grid = self.preview.grid
