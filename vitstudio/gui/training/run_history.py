"""The Training panel's History tab: every run folder in models/ as one line; clicking one asks to show it."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from vitstudio.core.models.catalog import models_dir
from vitstudio.core.train.runs import list_runs


class RunHistoryView(QWidget):
    run_clicked = Signal(object)  # the run folder (Path)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = QListWidget()
        self.list.itemClicked.connect(self._on_clicked)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Runs in {models_dir()} (click one to see its curves and results):"))
        layout.addWidget(self.list)
        self.listed: set[str] = set()

    def refresh(self, active_run: Path | None, shown_run: Path | None) -> None:
        """Reads every run folder: called when the list changes (a run starts or ends), not on every epoch."""
        self.listed = set()
        with QSignalBlocker(self.list):
            self.list.clear()
            for run in list_runs():
                acc = f"{run.best_val_acc * 100:.1f} %" if run.best_val_acc is not None else "–"
                status = "training…" if active_run is not None and run.folder == active_run else run.status
                item = QListWidgetItem(f"{run.name} · {status} · {run.epochs} epochs · best val {acc} · "
                                       f"from {run.base_model}")
                item.setData(Qt.UserRole, str(run.folder))
                self.list.addItem(item)
                self.listed.add(str(run.folder))
                if shown_run is not None and run.folder == shown_run:
                    item.setSelected(True)

    def _on_clicked(self, item: QListWidgetItem) -> None:
        self.run_clicked.emit(Path(item.data(Qt.UserRole)))
