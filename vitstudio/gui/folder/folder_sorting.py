"""The Folder tab's file actions: export the table as CSV, sort the images into class folders (copy), a label
review's move and exclusions — each sort, move and exclusion a command on the panel's QUndoStack (Edit → Undo /
Redo, the toolbar's Undo). A mixin of `FolderPanel`: these methods are the panel's, and read its results, table and
toolbar.

Sorts and moves are journalled where the command line journals them (the app's data folder, keyed by the folder
sorted into), so `vitstudio undo-sort FOLDER` undoes what the app did and the other way round. After every file
operation the table (and the similar-images search over it) follows the files that moved: a later sort finds every
file where it is."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import partial

import numpy as np
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QFileDialog, QMessageBox

from vitstudio.core.folder.exclusions import read_exclusions, write_exclusions
from vitstudio.core.folder.journal import relocations
from vitstudio.core.folder.sorting import (
    UNSURE,
    NestedFoldersError,
    apply_sort,
    check_out_folder,
    journal_dir,
    plan_sort,
    undo_sort,
)

from .. import workers
from .folder_review import item_path
from .folder_undo import ExclusionCommand, FileOperationCommand, ReviewItemMemo

# Steps Edit -> Undo reaches back. Each keeps what it needs to undo (a sort's whole plan, a review item and its
# thumbnail): unbounded, a long session kept every one of them. Older sorts stay undoable from the CLI's journal.
UNDO_LIMIT = 100


class FolderSortingMixin:
    """Export, sort into folders, move, exclude; undo and redo them (`undo_stack`)."""

    def _init_file_actions(self) -> None:
        self.undo_stack = QUndoStack(self)
        self.undo_stack.setUndoLimit(UNDO_LIMIT)  # (only possible while the stack is empty)
        self._file_job: workers.JobHandle | None = None
        self.undo_stack.indexChanged.connect(self._refresh_undo_button)
        # the review tab's own Exclude only edits its set: here it becomes an undoable, remembered command
        self.review_tab.exclude_button.clicked.disconnect()  # (only the tab's own slot is connected to it)
        self.review_tab.exclude_button.clicked.connect(self.exclude_with_undo)
        self._refresh_undo_button()

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
            self.state.report(exc, "Sort into folders")  # an error, not a question: logged, not a modal box
            return
        selected = bool(self._selected_rows())
        plan = self.sort_plan(out, self.view_state.min_conf, False, selected)
        answer = QMessageBox.question(  # the note: when the model does not fit the images, said before they move
            self, "Sort into folders", sort_question(plan, self.view_state.min_conf, self.fit.unreliable_note()),
            QMessageBox.Ok | QMessageBox.Cancel)
        if answer == QMessageBox.Ok:
            self.run_sort(plan)

    def run_sort(self, plan) -> None:
        """Copy (or move) the plan's files in a long job, as an undoable command."""
        verb = "Move" if plan.move else "Sort"
        self.undo_stack.push(FileOperationCommand(self, plan, f"{verb} {len(plan.placements)} images into "
                                                              f"{os.path.basename(plan.out) or plan.out}"))

    def _relabel(self, path: str, suggested: str) -> None:
        target_root = os.path.dirname(os.path.dirname(path))
        plan = plan_sort([(path, suggested, 1.0)], target_root, move=True)
        if QMessageBox.question(self, "Move to another class", f"Move {path}\nto {plan.placements[0].target}?\n"
                                "Edit → Undo (Ctrl+Z) puts it back; the undo log is kept in "
                                f"{journal_dir(target_root)}.", QMessageBox.Ok | QMessageBox.Cancel) != QMessageBox.Ok:
            return
        item = self.review_tab.list.currentItem()
        memo = ReviewItemMemo.take(self.review_tab.list, item) if item is not None else None
        self.undo_stack.push(FileOperationCommand(self, plan, f"Move {os.path.basename(path)} to {suggested}",
                                                  kind="review-move", memo=memo))

    # -- running the commands ----------------------------------------------------------------------------------
    def file_operation_running(self) -> bool:
        return self._file_job is not None and not self._file_job.done

    def undo_last(self) -> None:
        """Edit → Undo and the toolbar's Undo: the last sort, move or exclusion (one file job at a time)."""
        if self.file_operation_running():
            self.state.message.emit("warning", "A sort or undo is still running: undo again when it has finished.")
        elif self.undo_stack.canUndo():
            self.undo_stack.undo()

    def redo_last(self) -> None:
        if self.file_operation_running():
            self.state.message.emit("warning", "A sort or undo is still running: redo when it has finished.")
        elif self.undo_stack.canRedo():
            self.undo_stack.redo()

    def run_file_operation(self, command: FileOperationCommand, undo: bool) -> None:
        if undo and command.log is None:  # it never ran (it failed before its journal was written)
            self._review_item_back(command)
            return
        if undo:
            log = command.log
            name, job = "Undoing " + command.text(), lambda cancel: undo_sort(log)
        else:
            if command.memo is not None:
                command.memo.remove_from(self.review_tab.list)
                self.review_tab.refresh_buttons(self.retrain_button.isEnabled())
            plan, kind = command.plan, command.kind
            name, job = command.text(), lambda cancel: apply_sort(plan, kind=kind, cancel=cancel)
        self._file_job = workers.start_job(name, job, on_result=partial(self._on_file_operation, command, undo),
                                           on_error=self._on_file_operation_failed, kind=workers.LONG)
        self._refresh_undo_button()

    def _on_file_operation(self, command: FileOperationCommand, undo: bool, result) -> None:
        self._file_job = None
        if undo:
            self._review_item_back(command)
        else:
            command.log = result.log
        trouble = (result.problems or result.kept) if undo else result.errors
        self.state.message.emit("warning" if trouble else "info", result.describe())
        for path, reason in result.problems if undo else result.errors:
            self.state.message.emit("warning", f"{path}: {reason}")
        self.follow_moves(relocations(result.log))
        self._refresh_undo_button()

    def _on_file_operation_failed(self, exc) -> None:
        self._file_job = None
        self._refresh_undo_button()
        self._on_failed(exc)

    def _review_item_back(self, command: FileOperationCommand) -> None:
        if command.memo is not None:
            command.memo.put_back(self.review_tab.list)
            self.review_tab.refresh_buttons(self.retrain_button.isEnabled() or bool(self.excluded))

    def follow_moves(self, moves: dict[str, str]) -> None:
        """The table, the similar-images search and the exclusions follow files a move (or its undo) relocated."""
        if not moves:
            return
        if self.results is not None:
            self.results = self.results.relocated(moves)
            self.embedded = replace(self.embedded, paths=self.results.paths)  # same rows, same order
            self.model.set_results(self.results)
            self.apply_filters()
        moved = {p for p in self.excluded if p in moves}
        if moved:
            self.excluded.difference_update(moved)
            self.excluded.update(moves[p] for p in moved)
            self._save_exclusions(self.folder)

    def _refresh_undo_button(self, *_index) -> None:
        can = self.undo_stack.canUndo() and not self.file_operation_running()
        self.undo_button.setEnabled(can)
        self.undo_button.setToolTip(f"Undo {self.undo_stack.undoText()} (Ctrl+Z; edited copies are kept)"
                                    if can else "Nothing to undo yet")

    # -- exclusions --------------------------------------------------------------------------------------------
    def exclude_with_undo(self) -> None:
        """Leave the selected review image out of training: undoable, and remembered for this dataset."""
        item = self.review_tab.list.currentItem()
        if item is not None and self.folder:
            self.undo_stack.push(ExclusionCommand(self, self.folder, ReviewItemMemo.take(self.review_tab.list, item)))

    def set_excluded(self, dataset: str, memo: ReviewItemMemo, excluded: bool) -> None:
        if dataset != self.folder:  # another folder is open now: only its remembered list changes
            kept = set(read_exclusions(dataset))
            write_exclusions(dataset, kept | {memo.path} if excluded else kept - {memo.path})
            return
        if excluded:
            self.excluded.add(memo.path)
            memo.remove_from(self.review_tab.list)
        else:
            self.excluded.discard(memo.path)
            memo.put_back(self.review_tab.list)
        self._save_exclusions(dataset)
        self.review_tab.refresh_buttons(self.results is not None)

    def _save_exclusions(self, dataset: str | None) -> None:
        if dataset:
            write_exclusions(dataset, self.excluded)

    def _restore_exclusions(self) -> None:
        """A folder opened again: what its label review left out before (this session or an earlier one)."""
        if self.folder:
            self.excluded.update(read_exclusions(self.folder))
            self.review_tab.refresh_buttons(self.results is not None)

    def _hide_excluded_from_review(self) -> None:
        for i in reversed(range(self.review_tab.list.count())):
            if item_path(self.review_tab.list.item(i)) in self.excluded:
                self.review_tab.list.takeItem(i)


def sort_question(plan, min_confidence: float, note: str = "") -> str:
    """The sort's dry run in words. The 'unsure' folder is named only when there is a threshold: with 0 nothing
    is under it ("Images under 0% confidence go to 'unsure'" promised a folder that never fills)."""
    threshold = (f"Images under {min_confidence:.0%} confidence go to '{UNSURE}'." if min_confidence > 0 else
                 f"No confidence threshold (Min confidence is 0): every image goes to its predicted class, none to "
                 f"'{UNSURE}'.")
    return (f"{plan.describe()}{note}\n\n{threshold} Files are copied (the originals stay), never overwritten. "
            f"Edit → Undo (Ctrl+Z) removes the copies again; the undo log is kept in {journal_dir(plan.out)}.")
