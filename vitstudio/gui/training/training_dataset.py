"""The Training tab's dataset form: dataset folder (browse or type) with its summary and class balance, base
model, run name and probe image. Only widgets and their drawing: the panel scans and starts runs."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from vitstudio.gui import file_dialogs
from vitstudio.gui.common.model_marks import MODEL_LIST_WIDTH


class TrainingDatasetWidget(QWidget):
    def __init__(self, catalog_names: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.folder = QLineEdit()
        self.folder.setPlaceholderText("a folder with one subfolder of images per class (drop it here)")
        self.browse_button = QPushButton("Browse…")
        self.dataset_info = QLabel("No dataset chosen.")
        self.dataset_info.setWordWrap(True)
        self.balance = pg.PlotWidget(title="Images per class")
        self.balance.setFixedHeight(120)
        self.balance.setMouseEnabled(False, False)  # a count per class: the wheel scrolls the form, never zooms it
        self.balance.setMenuEnabled(False)
        self.balance.hideButtons()
        self.base_model = QComboBox(editable=True)
        self.base_model.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.base_model.setMinimumContentsLength(18)
        self.base_model.view().setMinimumWidth(MODEL_LIST_WIDTH)  # the open list shows whole names (the box is narrow)
        self.base_model.addItems(catalog_names)
        self.base_model.setEditText("")
        self.run_name = QLineEdit()
        self.probe = QLineEdit()
        self.probe.setPlaceholderText("default: the first validation image")
        probe_browse = QPushButton("…")
        probe_browse.setMaximumWidth(30)
        probe_browse.clicked.connect(self._browse_probe)
        self._lay_out(probe_browse)

    def _lay_out(self, probe_browse: QPushButton) -> None:
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder, 1)
        folder_row.addWidget(self.browse_button)
        form = QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Dataset", folder_row)
        form.addRow(self.dataset_info)
        form.addRow(self.balance)
        form.addRow("Base model", self.base_model)
        form.addRow("Run name", self.run_name)
        probe_row = QHBoxLayout()
        probe_row.addWidget(self.probe, 1)
        probe_row.addWidget(probe_browse)
        form.addRow("Probe image", probe_row)

    def _browse_probe(self) -> None:
        path = file_dialogs.open_file(self, "Probe image", "Images (*.jpg *.jpeg *.png *.bmp *.webp)")
        if path:
            self.probe.setText(path)
            self.probe.editingFinished.emit()  # chosen: as if typed and entered (the field follows, bind)

    def show_balance(self, counts: dict[str, int]) -> None:
        """Images per class, as bars (class names cut to 10 characters)."""
        self.balance.clear()
        self.balance.addItem(pg.BarGraphItem(x=np.arange(len(counts)), height=list(counts.values()), width=0.7,
                                             brush="#4c72b0"))
        self.balance.getAxis("bottom").setTicks([[(i, c[:10]) for i, c in enumerate(counts)]])
