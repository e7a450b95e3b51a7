"""The Training panel's dataset side, a mixin of TrainingPanel: choose a folder (browse, type or drop), scan it on
a worker, show its summary, name the next run, and preview the augmentation on its images. Each state of the
dataset (none, scanning, unreadable, ready) replaces the status it left behind."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from vitstudio.core.models.catalog import models_dir

from .. import workers
from .start_readiness import SCANNING, fresh_run_name
from .training_form import describe_scan
from .training_jobs import preview_job, scan_job


class TrainingDatasetMixin:
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        folders = [u.toLocalFile() for u in event.mimeData().urls() if Path(u.toLocalFile()).is_dir()]
        if folders:
            self.set_dataset(folders[0])
            event.acceptProposedAction()

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Dataset folder (one subfolder per class)")
        if folder:
            self.set_dataset(folder)

    def set_dataset(self, folder: str, exclude: list | None = None) -> None:
        """Scan `folder`; `exclude` (from the folder view's label review) is left out of the runs started here."""
        if not folder:
            return
        self.exclude = list(exclude or [])
        self.folder.setText(folder)
        self.dataset_info.setText("Scanning…")
        self.scan, self.dataset_problem = None, SCANNING
        self._refresh_buttons()
        self.view_state.update(dataset=folder)
        self.jobs.start("scan", "Scanning dataset", scan_job, folder, on_result=self._on_scan,
                        on_error=self._on_scan_error)

    def _on_scan_error(self, exc: BaseException) -> None:
        self.scan = None
        self.dataset_problem = f"This dataset folder cannot be used: {workers.describe(exc)}"
        self.dataset_info.setText(f"<b>Cannot use this folder:</b> {workers.describe(exc)}")
        self.dataset.balance.clear()
        self._refresh_buttons()
        if not self.running:
            self.status.setText(self.dataset_problem)

    def _on_scan(self, found) -> None:
        scan, copies = found
        self.scan = scan
        self.dataset_info.setText(describe_scan(scan, copies, len(self.exclude)))
        self.dataset.show_balance(scan.counts)
        self.dataset_problem = ""
        if not self.run_name.text() or self.run_name.text() == self._auto_name:
            self._name_next_run()
        self._refresh_buttons()
        if not self.running:  # the dataset's complaints ("Choose a readable dataset folder…") are over
            self.status.setText(self.start_button.toolTip() if not self.start_button.isEnabled()
                                else "Ready: press Start.")

    def _name_next_run(self) -> None:
        """A fresh run name (a finished run's name is taken: the next Start must not fail on it)."""
        root = self.scan.root if self.scan is not None else "run"
        self._auto_name = fresh_run_name(root, self.form.preset.currentText())
        self.run_name.setText(self._auto_name)

    def preview_augmentation(self) -> None:
        """16 augmented training views with the form's settings, computed on a worker, shown in a grid."""
        if self.scan is None:
            self.status.setText(self.dataset_problem)
            return
        try:
            config = self.form.config(str(self.scan.root), "preview", str(models_dir() / ".preview"))
            config.validate()
        except ValueError as exc:
            self.status.setText(str(exc))
            return
        model = self.state.model
        size = (config.img_size, config.img_size) if config.img_size else (model.input_hw if model else (224, 224))
        interpolation = model.data_config.get("interpolation", "bicubic") if model else "bicubic"
        paths = [p for files in self.scan.train.values() for p in files]
        self.preview_box.label.setText("Computing augmented views…")
        self.jobs.start("preview", "Augmentation preview", preview_job, paths, config, size, interpolation,
                        on_result=self._show_preview, on_error=self._on_preview_error)
        self.right.setCurrentWidget(self.preview_box)

    def _on_preview_error(self, exc: BaseException) -> None:
        self.preview_box.label.setText(workers.describe(exc))

    def _show_preview(self, grid) -> None:
        self.preview_box.show_grid(grid, self.form.config("", "", ""))
        self.preview_grid = self.preview_box.grid
