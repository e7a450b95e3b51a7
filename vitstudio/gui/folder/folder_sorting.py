"""The Folder tab's file actions: export the table as CSV, sort the images into class folders (copy, or a label
review's move), undo the last sort or move. A mixin of `FolderPanel`: these methods are the panel's, and read
its results, table and toolbar."""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtWidgets import QFileDialog, QMessageBox

from vitstudio.core.folder.sorting import (
    NestedFoldersError,
    apply_sort,
    check_out_folder,
    plan_sort,
    review_journal_dir,
    undo_sort,
)

from .. import workers


class FolderSortingMixin:
    """Export, sort into folders, undo; `last_log` is the journal the Undo button reverses."""

    def _export_csv(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export the table (rows shown)", "results.csv", "CSV (*.csv)")
        if path:
            n = self.results.write_csv(path, np.asarray(self.visible_rows(), int))
            self.state.message.emit("info", f"Wrote {n} rows to {path}")

    def sort_plan(self, out: str, min_confidence: float, move: bool, selected_only: bool):
        r = self.results
        rows = self._selected_rows() if selected_only else self.visible_rows()
        return plan_sort([(r.paths[i], r.predicted_label(i), float(r.confidence[i])) for i in rows], out,
                         min_confidence, move)

    def _selected_rows(self) -> list[int]:
        return sorted({self.model.source_row(i.row()) for i in self.table.selectionModel().selectedRows()})

    def _sort_dialog(self) -> None:
        out = QFileDialog.getExistingDirectory(self, "Sort into which folder? (class folders are created there)")
        if not out:
            return
        try:
            check_out_folder([self.folder] if self.folder else [], out)
        except NestedFoldersError as exc:
            QMessageBox.warning(self, "Sort into folders", str(exc))
            return
        selected = bool(self._selected_rows())
        plan = self.sort_plan(out, self.min_conf.value(), False, selected)
        answer = QMessageBox.question(  # the note: when the model does not fit the images, said before they move
            self, "Sort into folders", f"{plan.describe()}{self.fit.unreliable_note()}\n\nImages under "
            f"{self.min_conf.value():.0%} confidence go to 'unsure'. Files are copied (the originals stay), never "
            "overwritten; an undo log is written in the target folder.", QMessageBox.Ok | QMessageBox.Cancel)
        if answer == QMessageBox.Ok:
            self.run_sort(plan)

    def run_sort(self, plan, **journal) -> None:
        """Copy/move in a long job; `journal`: apply_sort's log_dir and kind (a label-review move)."""
        workers.start_job("Sorting into folders", lambda cancel: apply_sort(plan, cancel=cancel, **journal),
                          on_result=self._on_sorted, on_error=self._on_failed, kind=workers.LONG)

    def _on_sorted(self, result) -> None:
        self.last_log = result.log
        self.undo_button.setEnabled(True)
        self.undo_button.setToolTip(f"Reverse what {result.log} records (edited copies are kept)")
        self.state.message.emit("info", result.describe())
        for path, reason in result.errors:
            self.state.message.emit("warning", f"{path}: {reason}")

    def undo_last(self) -> None:
        """Undo the last sort or label-review move of this session, in a long job (never destroys an edit)."""
        if not self.last_log:
            return
        self.undo_button.setEnabled(False)
        log = self.last_log
        workers.start_job("Undoing the last sort", lambda cancel: undo_sort(log), on_result=self._on_undone,
                          on_error=self._on_failed, kind=workers.LONG)

    def _on_undone(self, result) -> None:
        self.state.message.emit("warning" if result.problems or result.kept else "info", result.describe())
        for path, reason in result.problems:
            self.state.message.emit("warning", f"{path}: {reason}")
        if result.problems:  # something to retry
            self.undo_button.setEnabled(True)
        else:
            self.last_log = None

    def _relabel(self, path: str, suggested: str) -> None:
        target_root = os.path.dirname(os.path.dirname(path))
        plan = plan_sort([(path, suggested, 1.0)], target_root, move=True)
        journal_dir = str(review_journal_dir())
        if QMessageBox.question(self, "Move to another class", f"Move {path}\nto {plan.placements[0].target}?\n"
                                f"Undo it with 'Undo last sort/move'; the undo log is kept in {journal_dir}.",
                                QMessageBox.Ok | QMessageBox.Cancel) == QMessageBox.Ok:
            self.run_sort(plan, log_dir=journal_dir, kind="review-move")
            self.review_tab.drop_current()
