"""The Folder tab's questions before files move: which folder to sort into (and the sort's dry run in words), a
label-review move to another class. Plain functions over what they are given; the panel passes its results and rows,
and hands the plan the user accepted to its `FileOperations` (file_operations.py)."""

from __future__ import annotations

import os
from collections.abc import Callable

from PySide6.QtWidgets import QMessageBox, QWidget

from vitstudio.core.folder.sorting import UNSURE, NestedFoldersError, check_out_folder, journal_dir, plan_sort
from vitstudio.gui import file_dialogs


def results_plan(results, rows, out: str, min_confidence: float, move: bool):
    """The sort plan of the given rows of a folder's results (each to its predicted class)."""
    return plan_sort([(results.paths[i], results.predicted_label(i), float(results.confidence[i])) for i in rows],
                     out, min_confidence, move)


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
    target_root = os.path.dirname(os.path.dirname(path))
    plan = plan_sort([(path, label, 1.0)], target_root, move=True)
    answer = QMessageBox.question(parent, "Move to another class", f"Move {path}\nto {plan.placements[0].target}?\n"
                                  "Edit → Undo (Ctrl+Z) puts it back; the undo log is kept in "
                                  f"{journal_dir(target_root)}.", QMessageBox.Ok | QMessageBox.Cancel)
    return plan if answer == QMessageBox.Ok else None


def sort_question(plan, min_confidence: float, note: str = "") -> str:
    """The sort's dry run in words. The 'unsure' folder is named only when there is a threshold: with 0 nothing
    is under it ("Images under 0% confidence go to 'unsure'" promised a folder that never fills)."""
    threshold = (f"Images under {min_confidence:.0%} confidence go to '{UNSURE}'." if min_confidence > 0 else
                 f"No confidence threshold (Min confidence is 0): every image goes to its predicted class, none to "
                 f"'{UNSURE}'.")
    return (f"{plan.describe()}{note}\n\n{threshold} Files are copied (the originals stay), never overwritten. "
            f"Edit → Undo (Ctrl+Z) removes the copies again; the undo log is kept in {journal_dir(plan.out)}.")
