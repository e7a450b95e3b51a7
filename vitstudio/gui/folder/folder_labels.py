"""The Folder tab's Labels side tab: label an unlabelled folder in the app. Select images (the table's selected
rows, else the map's box) → "Label as…" a new or existing class, or press 1–9 over the table for the classes in
order; "Train" fits the quick head on the cached features of what is labelled so far and colours the map by its
predictions (pale where it is unsure); "Suggest next" filters the table to the images whose labels would teach it
most. Labels live in a labels file (default: the app's data folder, keyed by the folder; the folder itself is
never written), every labelling is a command on the tab's undo stack (Edit → Undo), and they are back when the
folder is opened again. "Train a model…" hands the labels file to the Training tab (its first preset, quick)."""

from __future__ import annotations

import collections
import html
import os

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QUndoCommand
from PySide6.QtWidgets import (
    QFileDialog,
    QGridLayout,
    QInputDialog,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vitstudio.core.files import counted, shown_path
from vitstudio.core.train.labelling import class_order, default_labels_path, load_labels, save_labels
from vitstudio.gui import file_dialogs

from .. import workers
from .folder_undo import ReviewItemMemo

SUGGEST_N = 9
UNSURE = 0.7  # below this probability a dot is drawn pale


def label_head_job(cancel, features, paths: list[str], labels: dict[str, str]):
    from vitstudio.core.train.labelling import fit_label_head

    return fit_label_head(features, paths, labels)


def suggest_job(cancel, features, paths: list[str], labels: dict[str, str], n: int):
    from vitstudio.core.train.suggest import suggest

    classes = {c: i for i, c in enumerate(class_order(labels))}
    y = np.asarray([classes.get(labels.get(p), -1) for p in paths], np.int64)
    return [s.index for s in suggest(features, y, n, num_classes=max(len(classes), 1))]


class LabelCommand(QUndoCommand):
    """Give `paths` the label `label` (None: unlabel); undo restores each one's previous label. With `memo` (a
    label-review item relabelled), the item leaves the review list and comes back on undo."""

    def __init__(self, tab, paths: list[str], label: str | None, memo: ReviewItemMemo | None = None) -> None:
        name = f"'{label}'" if label else "no label"
        super().__init__(f"Label {counted(len(paths), 'image')} as {name}")
        self.tab, self.paths, self.label, self.memo = tab, list(paths), label, memo
        self.before = {p: tab.labels.get(p) for p in self.paths}

    def redo(self) -> None:
        self.tab.apply_labels({p: self.label for p in self.paths})
        if self.memo is not None:
            self.memo.remove_from(self.tab.panel.review)

    def undo(self) -> None:
        self.tab.apply_labels(self.before)
        if self.memo is not None:
            self.memo.put_back(self.tab.panel.review)


class LabelsTab(QWidget):
    train_requested = Signal(str)  # the labels file: the Training tab takes it as its dataset

    def __init__(self, panel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.path: str | None = None  # the labels file
        self.labels: dict[str, str] = {}
        self.head = None
        self.slot = workers.KeyedSlot(workers.INTERACTIVE)
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
    def open_for(self, folder: str | None) -> None:
        """The labels of `folder` (its default file in the data folder), read again after a restart."""
        self.head = None
        self.slot.cancel()
        self.path = str(default_labels_path(folder)) if folder else None
        self.labels = load_labels(self.path) if self.path else {}
        self._refresh()

    def _choose_file(self) -> None:
        path = file_dialogs.save_file(self, "Keep the labels in", self.path or "labels.csv", "Labels file (*.csv)",
                                      options=QFileDialog.DontConfirmOverwrite)
        if path:
            self.path = path
            self.labels.update(load_labels(path))  # an existing file's labels join those made here
            self._save()
            self._refresh()

    # -- labelling --------------------------------------------------------------------------------------
    def selected_paths(self) -> list[str]:
        panel = self.panel
        if panel.results is None:
            return []
        rows = sorted({panel.model.rows[i.row()] for i in panel.table.selectionModel().selectedRows()})
        if not rows and panel.map_rows is not None:
            rows = list(panel.map_rows)
        return [panel.results.paths[int(r)] for r in rows]

    def label_selection(self) -> None:
        paths = self.selected_paths()
        if not paths:
            self.panel.state.message.emit("warning", "Select images first: rows of the table, or the map's box.")
            return
        classes = class_order(self.labels)
        guess = self.guess(paths)
        options = classes + [guess] if guess and guess not in classes else classes
        label, ok = QInputDialog.getItem(self, "Label as", f"Class of the {counted(len(paths), 'image')} selected:",
                                         options, options.index(guess) if guess else 0, True)
        if ok and label.strip():
            self.label(paths, label.strip())

    def guess(self, paths: list[str]) -> str | None:
        """The class `paths` most likely are, offered first by Label as…: the class folder they are in (in a folder
        of class folders the folder says more than any model, and it names the class whether or not it is one made
        yet), else the quick head's when it is trained, else the model's top-1 while no class is made yet or when
        it is one of the classes made (an ImageNet class is no guess among the user's own)."""
        results, classes = self.panel.results, class_order(self.labels)
        if results is None or not paths:
            return None
        row_of = {path: row for row, path in enumerate(results.paths)}
        rows = [row_of[p] for p in paths if p in row_of]
        foldered = len(set(results.given) - {""}) > 1  # one folder of all the images names no class
        names = [results.given[r] for r in rows if results.given[r]] if foldered else []
        if not names and self.head is not None:
            names = [self.head.classes[int(self.head.predicted[r])] for r in rows]
        elif not names:
            predicted = results.predicted_labels()
            names = [str(predicted[r]) for r in rows if predicted[r] and (not classes or predicted[r] in classes)]
        return collections.Counter(names).most_common(1)[0][0] if names else None

    def label_selection_as_number(self, number: int) -> None:
        classes = class_order(self.labels)
        if number > len(classes):
            self.panel.state.message.emit("warning", f"There are {len(classes)} classes: keys 1–{len(classes)} "
                                          "label the selected rows; Label selection as… adds a class.")
            return
        paths = self.selected_paths()
        if paths:
            self.label(paths, classes[number - 1])

    def label(self, paths: list[str], label: str | None) -> None:
        if self.path is None:
            self.panel.state.message.emit("warning", "Open a folder first.")
            return
        self.panel.files.undo_stack.push(LabelCommand(self, paths, label))

    def relabel_reviewed(self, path: str, suggested: str) -> bool:
        """The label review's "suggested class" for an image labelled here: its label changes here (undoable) and
        its file stays where it is. False for an image whose label is its folder (that one is moved)."""
        if path not in self.labels:
            return False
        item = self.panel.review.currentItem()
        memo = ReviewItemMemo.take(self.panel.review, item) if item is not None else None
        self.panel.files.undo_stack.push(LabelCommand(self, [path], suggested, memo))
        self.panel.state.message.emit("info", f"{shown_path(path)} labelled '{suggested}' here (the file stays in "
                                      "its folder; Edit → Undo takes it back).")
        return True

    def apply_labels(self, changes: dict[str, str | None]) -> None:
        for path, label in changes.items():
            if label is None:
                self.labels.pop(path, None)
            else:
                self.labels[path] = label
        self.head = None  # the colours were of the previous labels
        self._save()
        self._refresh()

    def _save(self) -> None:
        if self.path is not None:
            paths = list(self.panel.results.paths) if self.panel.results is not None else []
            save_labels(self.path, self.labels, paths)

    # -- train, suggest ------------------------------------------------------------------------------------
    def _inputs(self):
        embedded, results = self.panel.embedded, self.panel.results
        if embedded is None or results is None:
            return None
        return embedded.features_of(), list(results.paths), dict(self.labels)

    def train(self) -> None:
        inputs = self._inputs()
        if inputs is None or len(class_order(self.labels)) < 2:
            self.panel.state.message.emit("warning", "Label images of at least two classes first.")
            return
        self.info.setText("Fitting the quick head…")
        self.slot.start(("train", tuple(sorted(self.labels.items()))), "Quick head", label_head_job, *inputs,
                        on_result=self.show_head, on_error=self.panel.state.report)

    def show_head(self, head) -> None:
        self.head = head
        groups = []
        for i, name in enumerate(head.classes):
            hue = pg.intColor(i, hues=max(len(head.classes), 1)).getRgb()[:3]
            pale = tuple(int(c + (255 - c) * 0.6) for c in hue)
            sure, unsure = (head.predicted == i) & (head.confidence >= UNSURE), (head.predicted == i) & (
                head.confidence < UNSURE)
            groups += [(name, hue, np.flatnonzero(sure)), (f"{name}, unsure", pale, np.flatnonzero(unsure))]
        self.panel.map.set_groups([g for g in groups if len(g[2])])
        # short enough for the map's width at 1280×720 (it was cut after "restores the model's"); the rest is
        # said in the line below the tabs
        self.panel.map.setTitle(f"The quick head of {head.labelled} labels", size="9pt")
        self.panel.side.setCurrentWidget(self.panel.map_tab)
        self.info.setText(f"The map shows the quick head's predictions from {head.labelled} labelled images "
                          f"(pale: under {UNSURE:.0%} sure; Colour by restores the model's). Label more, or "
                          f"Suggest next.")

    def suggest_next(self) -> None:
        inputs = self._inputs()
        if inputs is None:
            return
        self.slot.start(("suggest", tuple(sorted(self.labels.items()))), "Suggesting", suggest_job, *inputs,
                        SUGGEST_N, on_result=self._show_suggestions, on_error=self.panel.state.report)

    def filters_reset(self) -> None:
        """Reset filters shows every row: the line saying the table shows the suggestions goes with them."""
        self._refresh()

    def _show_suggestions(self, rows: list[int]) -> None:
        self.panel.group_rows = np.asarray(rows, np.int64)  # as a picked duplicate group: just these rows
        self.panel.apply_filters()
        self.info.setText(f"The table shows the {counted(len(rows), 'image')} to label next (Reset filters shows all).")

    def _refresh(self) -> None:
        self.panel.model.show_labels(self.labels)  # the table marks the labelled rows
        classes = class_order(self.labels)
        counts = {c: 0 for c in classes}
        for label in self.labels.values():
            counts[label] += 1
        # "key 1: class 2 (1 image)": a bare bold number beside a class named by a digit read as another class
        self.classes.setText("   ".join(f"key <b>{i}</b>: {html.escape(c)} ({counted(counts[c], 'image')})"
                                        for i, c in enumerate(classes, 1)) if classes else "No labels yet.")
        where = os.path.basename(self.path) if self.path else ""
        self.file_button.setToolTip(f"Labels kept in {self.path}" if self.path else "")
        has = self.panel.results is not None and self.path is not None
        for w in (self.label_button, self.suggest_button, self.file_button):
            w.setEnabled(has)
        self.train_button.setEnabled(has and len(classes) >= 2)
        self.model_button.setEnabled(has and len(classes) >= 2)
        if has:
            self.info.setText(f"{len(self.labels)} of {len(self.panel.results)} images labelled ({where}).")
