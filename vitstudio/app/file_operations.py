"""The Folder tab's file jobs, Qt-free: sorts into class folders and label-review moves, each a command on the app's
one undo stack (vitstudio/app/undo.py: Edit → Undo / Redo, the toolbar's Undo), one file job at a time over the
runner the face gave the Folder model.

A sort or a move is carried out — and undone — through the journal the command line uses (`apply_sort`,
`undo_sort`, kept in the app's data folder, keyed by the folder sorted into), so `vitstudio undo-sort FOLDER` undoes
what the app did and the other way round; undo never destroys a file the user changed since (the journal checks
sizes and hashes). What a job has to say goes out as `said`; the files it relocated as `relocated` (the Folder
model's results follow them); a failed job as `failed`."""

from __future__ import annotations

import os
from functools import partial

from vitstudio.core.files import counted

from .evented import Event, EventedModel
from .folder_files import relocations, sort_job, undo_job
from .jobs import LONG, KeyedSlot, Runner
from .undo import UndoRefused, UndoStack


class FileOperationCommand:
    """A sort (copies) or a label-review move, journalled; `log` is the journal of its last run. `memo` (a review
    item: `remove()`, `put_back()`) leaves the review's list when the move is made and comes back when undone."""

    def __init__(self, operations: FileOperations, plan, text: str, kind: str = "sort", memo=None) -> None:
        self.text = text
        self.operations, self.plan, self.kind, self.memo = operations, plan, kind, memo
        self.log: str | None = None

    def redo(self) -> None:
        self.operations.run_file_operation(self, undo=False)

    def undo(self) -> None:
        self.operations.run_file_operation(self, undo=True)


class FileOperations(EventedModel):
    said = Event("level, text")
    relocated = Event("old path -> new path, after a sort, a move or an undo")
    failed = Event("the exception of a file job")
    changed = Event("a file job started or ended (undo and redo wait for it)")

    def __init__(self, runner: Runner, undo_stack: UndoStack) -> None:
        self.undo_stack = undo_stack  # the app's: sorts, labels and paint strokes in order
        self.slot = KeyedSlot(runner, LONG)
        self._job = None

    def run_sort(self, plan) -> None:
        """Copy (or move) the plan's files in a long job, as an undoable command."""
        verb = "Move" if plan.move else "Sort"
        self.undo_stack.push(FileOperationCommand(self, plan, f"{verb} {counted(len(plan.placements), 'image')} into "
                                                              f"{os.path.basename(plan.out) or plan.out}"))

    def move_reviewed(self, plan, path: str, label: str, memo=None) -> None:
        """A label-review move of `path` into its sibling class folder `label`."""
        self.undo_stack.push(FileOperationCommand(self, plan, f"Move {os.path.basename(path)} to {label}",
                                                  kind="review-move", memo=memo))

    def running(self) -> bool:
        return self._job is not None and not self._job.done

    def run_file_operation(self, command: FileOperationCommand, undo: bool) -> None:
        """Carry out (or undo) `command`: called by the command, on the undo stack's push, undo and redo."""
        if self.running():  # one file job at a time: the stack stays where it is
            raise UndoRefused(f"A sort or undo is still running: {'undo' if undo else 'redo'} again when it has "
                              "finished.")
        if undo and command.log is None:  # it never ran (it failed before its journal was written)
            if command.memo is not None:
                command.memo.put_back()
            return
        if undo:
            name, fn, inputs = "Undoing " + command.text, undo_job, (command.log,)
        else:
            if command.memo is not None:
                command.memo.remove()
            name, fn, inputs = command.text, sort_job, (command.plan, command.kind)
        self._job = None
        job = self.slot.start((id(command), undo), name, fn, *inputs, on_result=partial(self._on_done, command, undo),
                              on_error=self._on_failed)
        self._job = None if job.done else job  # (a script's runner has finished it already)
        self.changed.emit()

    def _on_done(self, command: FileOperationCommand, undo: bool, result) -> None:
        self._job = None
        if undo:
            if command.memo is not None:
                command.memo.put_back()
        else:
            command.log = result.log
        trouble = (result.problems or result.kept) if undo else result.errors
        self.said.emit("warning" if trouble else "info", result.describe())
        for path, reason in result.problems if undo else result.errors:
            self.said.emit("warning", f"{path}: {reason}")
        moves = relocations(result.log)
        self.changed.emit()
        if moves:
            self.relocated.emit(moves)

    def _on_failed(self, exc: BaseException) -> None:
        self._job = None
        self.changed.emit()
        self.failed.emit(exc)
