"""File → Where folder work runs…: this machine, or a Ray cluster at an address (the App's `folder_work`,
vitstudio/app/folder_work.py), with Test connection saying how many nodes, CPUs and GPUs it sees. The choice is kept
in the window's settings and applies to the next folder opened."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ..common.bind import bind
from ..common.type_map import control_for

KEYS = ("folder_work/where", "folder_work/address")


def restore_folder_work(work, settings) -> None:
    """The setting as last saved; a value the field refuses (an edited file) leaves the default."""
    where, address = (settings.value(key) for key in KEYS)
    try:
        work.state.update(where=str(where or "here"), address=str(address) if address else None)
    except (TypeError, ValueError):
        pass


class FolderWorkDialog(QDialog):
    def __init__(self, work, settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Where folder work runs")
        self.setMinimumWidth(460)  # an address and the line Test connection says, read whole
        self.work, self.settings = work, settings
        fields = work.state.fields()
        self.where = control_for(fields["where"])
        self.address = control_for(fields["address"], placeholder="HOST:6379 (empty: RAY_ADDRESS, else a local one)")
        bind(self.where, work.state, "where")
        bind(self.address, work.state, "address", live=True)
        self.test_button = QPushButton("Test connection")
        self.line = QLabel(work.line or "The Folder tab's embedding pass runs where this says; the cache and the "
                                        "results stay on this machine.")
        self.line.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Run folder work on", self.where)
        form.addRow("Cluster address", self.address)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.test_button)
        layout.addWidget(self.line)
        layout.addWidget(buttons)
        self.test_button.clicked.connect(work.test)
        buttons.rejected.connect(self.reject)
        work.said.connect(self._said)
        work.state.events.where.connect(self._enable)
        self._enable(work.state.where)
        self.finished.connect(self._save)

    def _said(self, line: str) -> None:
        self.line.setText(line)

    def _enable(self, where: str) -> None:
        on_cluster = where == "cluster"
        self.address.setEnabled(on_cluster)
        self.test_button.setEnabled(on_cluster)

    def _save(self, _result=None) -> None:
        self.work.said.disconnect(self._said)  # the dialog goes; the App's model stays
        self.work.state.events.where.disconnect(self._enable)
        self.settings.setValue(KEYS[0], self.work.state.where)
        self.settings.setValue(KEYS[1], self.work.state.address or "")
