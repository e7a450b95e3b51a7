"""The Training panel's History tab: every run folder in models/ as one line; clicking one asks to show it. The
line of the run in progress follows it epoch by epoch (`update_row`) without re-reading every run folder."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QStyledItemDelegate, QVBoxLayout, QWidget

from vitstudio.app.model_files import model_dirs
from vitstudio.app.training_jobs import list_runs

_BASE_ROLE = Qt.UserRole + 1  # the run's base model, kept to rewrite its line


def row_text(name: str, status: str, epochs: int, best_val_acc: float | None, base_model: str) -> str:
    acc = f"{best_val_acc * 100:.1f} %" if best_val_acc is not None else "–"
    return f"{name} · {status} · {epochs} epochs · best val {acc} · from {base_model}"


class _GluedUnits(QStyledItemDelegate):
    """Draws (and sizes) a line with a no-break space before '%': wrapped, "100.0 / %" split over two lines. The
    item's text keeps its plain space (its tooltip, and what callers read)."""

    def initStyleOption(self, option, index) -> None:  # noqa: N802 (Qt's name)
        super().initStyleOption(option, index)
        option.text = option.text.replace(" %", "\u00a0%")


class RunHistoryView(QWidget):
    run_clicked = Signal(object)  # the run folder (Path)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = QListWidget()
        self.list.setWordWrap(True)  # a long run name and base model wrap instead of running off the pane
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.list.setItemDelegate(_GluedUnits(self.list))
        self.list.itemClicked.connect(self._on_clicked)
        mine, *others = model_dirs()  # a source checkout's models/ (the demo) is listed too: said, not hidden
        also = f", then the read-only {' and '.join(map(str, others))}" if others else ""
        where = QLabel(f"Runs in {mine} (new runs go there){also}; click one to see its curves and results:")
        where.setWordWrap(True)
        self.where = where
        layout = QVBoxLayout(self)
        layout.addWidget(where)
        layout.addWidget(self.list)
        self.listed: set[str] = set()

    def refresh(self, active_run: Path | None, shown_run: Path | None) -> None:
        """Reads every run folder: called when the list changes (a run starts or ends), not on every epoch."""
        self.listed = set()
        # only a click (itemClicked) shows a run: rebuilding the list asks for nothing
        self.list.clear()
        for run in list_runs():
            status = "training…" if active_run is not None and run.folder == active_run else run.status
            item = QListWidgetItem(row_text(run.name, status, run.epochs, run.best_val_acc, run.base_model))
            item.setToolTip(item.text())
            item.setData(Qt.UserRole, str(run.folder))
            item.setData(_BASE_ROLE, run.base_model)
            self.list.addItem(item)
            self.listed.add(str(run.folder))
            if shown_run is not None and run.folder == shown_run:
                item.setSelected(True)

    def update_row(self, folder: Path, status: str, epochs: int, best_val_acc: float | None) -> None:
        """Rewrite the line of `folder` (the run in progress) from what the GUI already knows."""
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.UserRole) == str(folder):
                item.setText(row_text(folder.name, status, epochs, best_val_acc, item.data(_BASE_ROLE)))
                item.setToolTip(item.text())
                return

    def _on_clicked(self, item: QListWidgetItem) -> None:
        self.run_clicked.emit(Path(item.data(Qt.UserRole)))
