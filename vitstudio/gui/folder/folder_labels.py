"""The Folder tab's Labels side tab: label an unlabelled folder in the app. Select images (the table's selected
rows, else the map's box) → "Label as…" a new or existing class, or press 1–9 over the table for the classes in
order; "Train" fits the quick head on the cached features of what is labelled so far and colours the map by its
predictions (pale where it is unsure); "Suggest next" filters the table to the images whose labels would teach it
most. Labels live in a labels file (default: the app's data folder, keyed by the folder; the folder itself is
never written), every labelling is a command on the tab's undo stack (Edit → Undo), and they are back when the
folder is opened again. "Train a model…" hands the labels file to the Training tab (its first preset, quick)."""

from __future__ import annotations

import html
import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QGridLayout,
    QInputDialog,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vitstudio.core.files import counted
from vitstudio.gui import file_dialogs

from .folder_map import UNSURE


class LabelsTab(QWidget):
    train_requested = Signal(str)  # the labels file: the Training tab takes it as its dataset

    def __init__(self, panel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.model = panel.app.labels  # the labels, their file, the quick head
        self.model.changed.connect(self._refresh)
        self.model.head_ready.connect(self.show_head)
        self.model.suggested.connect(lambda rows: self.info.setText(
            f"The table shows the {counted(len(rows), 'image')} to label next (Reset filters shows all)."))
        self.model.warned.connect(lambda text: panel.state.message.emit("warning", text))
        self.info = QLabel("Open a folder: label its images here (select rows or the map's box, then Label as… "
                           "or keys 1–9), then Train.")
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
        self.train_button.clicked.connect(self.train)
        self.suggest_button.clicked.connect(self.suggest_next)
        self.file_button.clicked.connect(self._choose_file)
        self.model_button.clicked.connect(lambda: self.train_requested.emit(self.path or ""))
        panel.reset_button.clicked.connect(self.filters_reset)
        for key in range(1, 10):  # over the table: the selected rows become the key's class
            shortcut = QShortcut(QKeySequence(str(key)), panel.table, context=Qt.WidgetWithChildrenShortcut)
            shortcut.activated.connect(lambda k=key: self.label_selection_as_number(k))
        self._refresh()

    # -- the folder and its file -------------------------------------------------------------------------
    # what the model holds, read where the panel and tests look for it
    labels = property(lambda self: self.model.labels)
    path = property(lambda self: self.model.path)
    head = property(lambda self: self.model.head)

    def _choose_file(self) -> None:
        path = file_dialogs.save_file(self, "Keep the labels in", self.path or "labels.csv", "Labels file (*.csv)",
                                      options=QFileDialog.DontConfirmOverwrite)
        if path:
            self.model.use_file(path)

    # -- labelling --------------------------------------------------------------------------------------
    def selected_paths(self) -> list[str]:
        panel = self.panel
        if panel.results is None:
            return []
        rows = sorted({panel.table_model.rows[i.row()] for i in panel.table.selectionModel().selectedRows()})
        if not rows and panel.map_rows is not None:
            rows = list(panel.map_rows)
        return [panel.results.paths[int(r)] for r in rows]

    def label_selection(self) -> None:
        paths = self.selected_paths()
        if not paths:
            self.panel.state.message.emit("warning", "Select images first: rows of the table, or the map's box.")
            return
        classes = self.model.classes()
        guess = self.model.guess(paths)
        options = classes + [guess] if guess and guess not in classes else classes
        label, ok = QInputDialog.getItem(self, "Label as", f"Class of the {counted(len(paths), 'image')} selected:",
                                         options, options.index(guess) if guess else 0, True)
        if ok and label.strip():
            self.label(paths, label.strip())

    def label_selection_as_number(self, number: int) -> None:
        classes = self.model.classes()
        if number > len(classes):
            self.panel.state.message.emit("warning", f"There are {len(classes)} classes: keys 1–{len(classes)} "
                                          "label the selected rows; Label selection as… adds a class.")
            return
        paths = self.selected_paths()
        if paths:
            self.label(paths, classes[number - 1])

    def label(self, paths: list[str], label: str | None) -> None:
        self.model.label(paths, label)  # a command on the app's undo stack

    # -- train, suggest ------------------------------------------------------------------------------------
    def train(self) -> None:
        if self.model.train():
            self.info.setText("Fitting the quick head…")

    def show_head(self, head) -> None:
        """The head's predictions are drawn on the Map page (its model follows the head); said here."""
        self.info.setText(f"The map shows the quick head's predictions from {head.labelled} labelled images "
                          f"(pale: under {UNSURE:.0%} sure; Colour by restores the model's). Label more, or "
                          f"Suggest next.")

    def suggest_next(self) -> None:
        self.model.suggest_next()

    def filters_reset(self) -> None:
        """Reset filters shows every row: the line saying the table shows the suggestions goes with them."""
        self._refresh()

    def _refresh(self) -> None:
        self.panel.table_model.show_labels(self.labels)  # the table marks the labelled rows
        classes = self.model.classes()
        counts = {c: 0 for c in classes}
        for label in self.labels.values():
            counts[label] += 1
        # "key 1: class 2 (1 image)": a bare bold number beside a class named by a digit read as another class
        self.classes.setText("   ".join(f"key <b>{i}</b>: {html.escape(c)} ({counted(counts[c], 'image')})"
                                        for i, c in enumerate(classes, 1)) if classes else "No labels yet.")
        where = os.path.basename(self.path) if self.path else ""
        self.file_button.setToolTip(f"Labels kept in {self.path}" if self.path else "")
        has = self.model.ready()
        for w in (self.label_button, self.suggest_button, self.file_button):
            w.setEnabled(has)
        self.train_button.setEnabled(has and len(classes) >= 2)
        self.model_button.setEnabled(has and len(classes) >= 2)
        if has:
            self.info.setText(f"{len(self.labels)} of {len(self.panel.results)} images labelled ({where}).")
