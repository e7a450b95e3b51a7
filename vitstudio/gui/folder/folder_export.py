"""The Folder toolbar's Export… button over the app's `FolderExport`: its label counts what an export
takes ("Export 312 images…": the rows shown, or the rows selected in the table when two or more are); its
menu copies or moves them into class folders (an undoable sort: Edit → Undo, the toolbar's Undo), writes a labels
CSV, a CSV of every column, the Paint page's masks of them as COCO JSON, or hands them to the Training tab."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMenu, QMessageBox, QToolButton

from vitstudio.app.folder_export import FolderExport
from vitstudio.core.files import counted
from vitstudio.gui import file_dialogs

WHAT = ("Exports the rows shown (the filters, the map's box or lasso, the tag and view filters), or the rows selected "
        "in the table when two or more are (Ctrl+click, Shift+click)")


class FolderExportMenu(QObject):
    def __init__(self, button: QToolButton, export: FolderExport, picked: Callable[[], list[int]], files,
                 paint_page, parent=None) -> None:
        super().__init__(parent)
        self.button, self.export, self.picked = button, export, picked
        self.files, self.paint_page = files, paint_page  # the sort's undo stack; the Paint page's model
        menu = QMenu(button)
        self.actions = {
            "copy": menu.addAction("Copy into class folders…", lambda: self.into_folders(move=False)),
            "move": menu.addAction("Move into class folders…", lambda: self.into_folders(move=True)),
            "labels": menu.addAction("Labels CSV (path, label)…", self.labels_csv),
            "table": menu.addAction("CSV of every column…", self.table_csv),
            "coco": menu.addAction("Masks as COCO JSON (the Paint page's segmentation)…", self.coco),
            "training": menu.addAction("Train on them (the Training tab's dataset)", self.to_training),
        }
        menu.aboutToShow.connect(self.refresh)
        button.setMenu(menu)
        self.refresh()

    @property
    def count(self) -> int:
        results = self.export.folder.results
        return 0 if results is None else len(self.export.chosen(self.picked()))

    def refresh(self, *_changed) -> None:
        """The label counts what an export takes now; nothing to take, nothing offered."""
        n = self.count
        self.button.setText(f"Export {counted(n, 'image')}…" if n else "Export…")
        self.button.setEnabled(n > 0)
        self.button.setToolTip(f"{self.export.describe_choice(self.picked())}. {WHAT}." if n else WHAT)

    def _rows(self):
        return self.export.chosen(self.picked())

    def into_folders(self, move: bool) -> None:
        rows, verb = self._rows(), "Move" if move else "Copy"
        out = file_dialogs.choose_folder(self.button, f"{verb} {counted(len(rows), 'image')} into which folder? "
                                                      "(a folder per label is made there)", create=True)
        if not out:
            return
        try:
            plan = self.export.class_folders(rows, out, move)
        except ValueError as exc:  # inside the folder opened
            self.export.said.emit("warning", f"Nothing {'moved' if move else 'copied'}: {exc}")
            return
        answer = QMessageBox.question(self.button, f"{verb} into class folders", f"{plan.describe()}\n\nFiles are "
                                      "never overwritten. Edit → Undo (Ctrl+Z) takes it back.",
                                      QMessageBox.Ok | QMessageBox.Cancel)
        if answer == QMessageBox.Ok:
            self.files.run_sort(plan)

    def _save_as(self, title: str, name: str, filters: str) -> str:
        return file_dialogs.save_file(self.button, f"{title} of {counted(len(self._rows()), 'image')}", name, filters)

    def labels_csv(self) -> None:
        path = self._save_as("Labels CSV", "labels.csv", "CSV (*.csv)")
        if path:
            self.export.labels_csv(self._rows(), path)

    def table_csv(self) -> None:
        path = self._save_as("Every column", "images.csv", "CSV (*.csv)")
        if path:
            self.export.table_csv(self._rows(), path)

    def coco(self) -> None:
        page = self.paint_page
        painted = page.painted()
        path = self._save_as("Masks as COCO", "masks.coco.json", "JSON (*.json)") if painted else ""
        if painted and not path:
            return
        self.export.coco(self._rows(), path, painted, tuple(page.paint.state.classes))

    def to_training(self) -> None:
        self.export.to_training(self._rows())
