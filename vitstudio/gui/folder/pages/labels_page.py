"""The Labels page: label an unlabelled folder in the app — "Label selection as…" (the class the page guesses
offered first), keys 1–9 over the table, "Train (quick head)", "Suggest next", the labels file, "Train a model…" —
drawn from its model (`vitstudio.app.pages.labels.LabelsModel`), which acts on the App's selection and labels."""

from __future__ import annotations

import html
from functools import partial

from PySide6.QtWidgets import QFileDialog, QGridLayout, QInputDialog, QLabel, QPushButton, QVBoxLayout, QWidget

from vitstudio.app.pages.labels import KEYS, LabelsModel
from vitstudio.core.files import counted
from vitstudio.gui import file_dialogs

from ..folder_map import UNSURE


class LabelsPage(QWidget):
    page_id = "labels"

    def __init__(self, model: LabelsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.info = QLabel()
        self.info.setWordWrap(True)
        self.classes = QLabel("")
        self.classes.setWordWrap(True)
        self.label_button = QPushButton("Label selection as…")
        self.train_button = QPushButton("Train (quick head)")
        self.suggest_button = QPushButton("Suggest next")
        self.file_button = QPushButton("Labels file…")
        self.model_button = QPushButton("Train a model…")
        self.model_button.setToolTip("Open the Training tab with this labels file as the dataset (quick preset)")
        grid = QGridLayout()
        for i, w in enumerate((self.label_button, self.train_button, self.suggest_button, self.file_button,
                               self.model_button)):
            grid.addWidget(w, i // 2, i % 2)
        layout = QVBoxLayout(self)
        layout.addLayout(grid)  # first: the lines below change length and wrap, and moved the buttons under the
        layout.addWidget(self.info)  # pointer (a click meant for Suggest next would label the selection)
        layout.addWidget(self.classes)
        layout.addStretch(1)
        self.label_button.clicked.connect(self.label_selection)
        self.train_button.clicked.connect(model.train)
        self.suggest_button.clicked.connect(model.suggest_next)
        self.file_button.clicked.connect(self._choose_file)
        self.model_button.clicked.connect(model.request_training)
        model.changed.connect(self.draw)
        self.draw()

    def table_keys(self) -> dict[str, object]:
        """Keys over the Folder tab's table: 1–9 label the selected rows as the classes in order."""
        return {str(key): partial(self.model.label_as_number, key) for key in range(1, KEYS + 1)}

    def _choose_file(self) -> None:
        path = file_dialogs.save_file(self, "Keep the labels in", self.model.records.path or "labels.csv",
                                      "Labels file (*.csv)", options=QFileDialog.DontConfirmOverwrite)
        if path:
            self.model.use_file(path)

    def label_selection(self) -> None:
        paths = self.model.paths_to_label()
        if not paths:
            return
        options, first = self.model.offered(paths)
        label, ok = QInputDialog.getItem(self, "Label as", f"Class of the {counted(len(paths), 'image')} selected:",
                                         options, first, True)
        if ok and label.strip():
            self.model.label(paths, label.strip())

    def draw(self) -> None:
        model = self.model
        counts = model.counts()
        # "key 1: class 2 (1 image)": a bare bold number beside a class named by a digit read as another class
        self.classes.setText("   ".join(f"key <b>{i}</b>: {html.escape(c)} ({counted(n, 'image')})"
                                        for i, (c, n) in enumerate(counts.items(), 1)) if counts else "No labels yet.")
        path = model.records.path
        self.file_button.setToolTip(f"Labels kept in {path}" if path else "")
        ready = model.ready()
        for w in (self.label_button, self.suggest_button, self.file_button):
            w.setEnabled(ready)
        self.train_button.setEnabled(ready and len(counts) >= 2)
        self.model_button.setEnabled(ready and len(counts) >= 2)
        if model.note[:1] == ("head",):  # the head's predictions are drawn on the Map page
            self.info.setText(f"The map shows the quick head's predictions from {model.note[1]} labelled images "
                              f"(pale: under {UNSURE:.0%} sure; Colour by restores the model's). Label more, or "
                              f"Suggest next.")
        else:
            self.info.setText(model.describe())


PAGE = LabelsPage
