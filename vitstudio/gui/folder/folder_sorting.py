"""The Folder tab's questions before files move: which folder to sort into (and the sort's dry run in words), a
label-review move to another class. Plain functions over what they are given; the panel passes its results and rows,
and hands the plan the user accepted to the Folder model's `FileOperations` (app/file_operations.py)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QMessageBox, QWidget

from vitstudio.app.folder_files import NestedFoldersError, check_out_folder, journal_dir, move_plan, sort_question
from vitstudio.gui import file_dialogs


def ask_sort(parent: QWidget, sources: list[str], plan_for: Callable[[str], object], min_confidence: float,
             note: str, report: Callable) -> object | None:
    """Ask for the folder to sort into and show the dry run; the plan to carry out, or None. A folder inside the
    one sorted is refused as an error (logged through `report`), not a modal box."""
    out = file_dialogs.choose_folder(parent, "Sort into which folder? (class folders are created there)",
                                     create=True)
    if not out:
        return None
    try:
        check_out_folder(sources, out)
    except NestedFoldersError as exc:
        report(exc, "Sort into folders")
        return None
    plan = plan_for(out)
    answer = QMessageBox.question(  # the note: when the model does not fit the images, said before they move
        parent, "Sort into folders", sort_question(plan, min_confidence, note), QMessageBox.Ok | QMessageBox.Cancel)
    return plan if answer == QMessageBox.Ok else None


def ask_move(parent: QWidget, path: str, label: str) -> object | None:
    """A label-review move of one file into its sibling class folder `label`: the plan, if the user agrees."""
    plan = move_plan(path, label)
    answer = QMessageBox.question(parent, "Move to another class", f"Move {path}\nto {plan.placements[0].target}?\n"
                                  "Edit → Undo (Ctrl+Z) puts it back; the undo log is kept in "
                                  f"{journal_dir(plan.out)}.", QMessageBox.Ok | QMessageBox.Cancel)
    return plan if answer == QMessageBox.Ok else None


