"""The Folder tab's file operations: sorts into class folders, label-review moves and exclusions from training, each
a command on the app's one undo stack (vitstudio/app/undo.py: Edit → Undo / Redo, the toolbar's Undo), one file job
at a time.

A controller with named collaborators, not a mixin of the panel: it pushes onto the undo stack, owns the running file
job and the exclusions of the dataset open; it knows the label-review tab (whose items a move or an exclusion takes
off and puts back) and the Undo button. What it has to say goes out as `said`; the files a job relocated as `relocated`
(the panel's table follows them); a failed job as `failed`.

Sorts and moves are journalled where the command line journals them (the app's data folder, keyed by the folder
sorted into), so `vitstudio undo-sort FOLDER` undoes what the app did and the other way round."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QObject, Signal

from vitstudio.app.folder_files import read_exclusions, relocations, sort_job, undo_job, write_exclusions
from vitstudio.app.undo import UndoRefused
from vitstudio.core.files import counted

from .. import workers
from .folder_review import item_path
from .folder_undo import ExclusionCommand, FileOperationCommand, ReviewItemMemo


class FileOperations(QObject):
    said = Signal(str, str)  # level, text
    relocated = Signal(dict)  # old path -> new path, after a sort, a move or an undo
    failed = Signal(object)  # the exception of a file job

    def __init__(self, undo_stack, review_tab, undo_button, shown: Callable[[], tuple[str | None, bool]],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.review_tab, self.undo_button = review_tab, undo_button
        self._shown = shown  # the dataset open (a folder opened as a whole, else None), and are its results shown
        self.undo_stack = undo_stack  # the app's (vitstudio/app/undo.py): sorts, labels and paint strokes in order
        self._job: workers.JobHandle | None = None
        self.undo_stack.changed.connect(self._refresh_undo_button)
        # the review tab's own Exclude only edits its set: here it becomes an undoable, remembered command
        review_tab.exclude_button.clicked.disconnect()  # (only the tab's own slot is connected to it)
        review_tab.exclude_button.clicked.connect(self.exclude_current)
        self._refresh_undo_button()

    @property
    def excluded(self) -> set[str]:
        return self.review_tab.excluded

    # -- the commands ------------------------------------------------------------------------------------------
    def run_sort(self, plan) -> None:
        """Copy (or move) the plan's files in a long job, as an undoable command."""
        verb = "Move" if plan.move else "Sort"
        self.undo_stack.push(FileOperationCommand(self, plan, f"{verb} {counted(len(plan.placements), 'image')} into "
                                                              f"{os.path.basename(plan.out) or plan.out}"))

    def move_reviewed(self, plan, path: str, label: str) -> None:
        """The label review's move of the current item to the class `label` (the item leaves the list)."""
        item = self.review_tab.list.currentItem()
        memo = ReviewItemMemo.take(self.review_tab.list, item) if item is not None else None
        self.undo_stack.push(FileOperationCommand(self, plan, f"Move {os.path.basename(path)} to {label}",
                                                  kind="review-move", memo=memo))

    def exclude_current(self) -> None:
        """Leave the selected review image out of training: undoable, and remembered for this dataset."""
        item, (dataset, _) = self.review_tab.list.currentItem(), self._shown()
        if item is not None and dataset:
            self.undo_stack.push(ExclusionCommand(self, dataset, ReviewItemMemo.take(self.review_tab.list, item)))

    def running(self) -> bool:
        return self._job is not None and not self._job.done

    # -- carrying them out (called by the commands) ------------------------------------------------------------
    def run_file_operation(self, command: FileOperationCommand, undo: bool) -> None:
        if self.running():  # one file job at a time: the stack stays where it is
            raise UndoRefused(f"A sort or undo is still running: {'undo' if undo else 'redo'} again when it has "
                              "finished.")
        if undo and command.log is None:  # it never ran (it failed before its journal was written)
            self._review_item_back(command)
            return
        if undo:
            name, job = "Undoing " + command.text, partial(undo_job, log=command.log)
        else:
            if command.memo is not None:
                command.memo.remove_from(self.review_tab.list)
                self.review_tab.refresh_buttons(self.review_tab.retrain_button.isEnabled())
            name, job = command.text, partial(sort_job, plan=command.plan, kind=command.kind)
        self._job = workers.start_job(name, job, on_result=partial(self._on_done, command, undo),
                                      on_error=self._on_failed, kind=workers.LONG)
        self._refresh_undo_button()

    def _on_done(self, command: FileOperationCommand, undo: bool, result) -> None:
        self._job = None
        if undo:
            self._review_item_back(command)
        else:
            command.log = result.log
        trouble = (result.problems or result.kept) if undo else result.errors
        self.said.emit("warning" if trouble else "info", result.describe())
        for path, reason in result.problems if undo else result.errors:
            self.said.emit("warning", f"{path}: {reason}")
        moves = relocations(result.log)
        self._follow_exclusions(moves)
        self._refresh_undo_button()
        if moves:
            self.relocated.emit(moves)

    def _on_failed(self, exc) -> None:
        self._job = None
        self._refresh_undo_button()
        self.failed.emit(exc)

    def _review_item_back(self, command: FileOperationCommand) -> None:
        if command.memo is not None:
            command.memo.put_back(self.review_tab.list)
            self.review_tab.refresh_buttons(self.review_tab.retrain_button.isEnabled() or bool(self.excluded))

    def _refresh_undo_button(self, *_index) -> None:
        can = self.undo_stack.can_undo() and not self.running()
        self.undo_button.setEnabled(can)
        self.undo_button.setToolTip(f"Undo {self.undo_stack.undo_text()} (Ctrl+Z; edited copies are kept)"
                                    if can else "Nothing to undo yet")

    # -- exclusions --------------------------------------------------------------------------------------------
    def set_excluded(self, dataset: str, memo: ReviewItemMemo, excluded: bool) -> None:
        shown, has_results = self._shown()
        if dataset != shown:  # another folder is open now: only its remembered list changes
            kept = set(read_exclusions(dataset))
            write_exclusions(dataset, kept | {memo.path} if excluded else kept - {memo.path})
            return
        if excluded:
            self.excluded.add(memo.path)
            memo.remove_from(self.review_tab.list)
        else:
            self.excluded.discard(memo.path)
            memo.put_back(self.review_tab.list)
        write_exclusions(dataset, self.excluded)
        self.review_tab.refresh_buttons(has_results)

    def restore_exclusions(self) -> None:
        """A folder opened again: what its label review left out before (this session or an earlier one)."""
        dataset, has_results = self._shown()
        if dataset:
            self.excluded.update(read_exclusions(dataset))
            self.review_tab.refresh_buttons(has_results)

    def hide_excluded_from_review(self) -> None:
        for i in reversed(range(self.review_tab.list.count())):
            if item_path(self.review_tab.list.item(i)) in self.excluded:
                self.review_tab.list.takeItem(i)

    def _follow_exclusions(self, moves: dict[str, str]) -> None:
        moved = {p for p in self.excluded if p in moves}
        if moved:
            self.excluded.difference_update(moved)
            self.excluded.update(moves[p] for p in moved)
            dataset, _ = self._shown()
            if dataset:
                write_exclusions(dataset, self.excluded)
