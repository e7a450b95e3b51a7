"""The Folder tab's files: sorts into class folders and label-review moves (their plans, their dry run in words,
their jobs and undo, journalled where the command line journals them, so `vitstudio undo-sort FOLDER` undoes what
the app did), and the exclusions from training kept beside a dataset. Torch-free: files and their journal only."""

from __future__ import annotations

import os

from vitstudio.core.folder.exclusions import read_exclusions, write_exclusions
from vitstudio.core.folder.journal import relocations
from vitstudio.core.folder.sorting import UNSURE, NestedFoldersError, check_out_folder, journal_dir, plan_sort

__all__ = ["UNSURE", "NestedFoldersError", "check_out_folder", "journal_dir", "move_plan", "read_exclusions",
           "relocations", "results_plan", "sort_job", "sort_question", "undo_job", "write_exclusions"]


def results_plan(results, rows, out: str, min_confidence: float, move: bool):
    """The sort plan of the given rows of a folder's results (each to its predicted class)."""
    return plan_sort([(results.paths[i], results.predicted_label(i), float(results.confidence[i])) for i in rows],
                     out, min_confidence, move)


def move_plan(path: str, label: str):
    """A label-review move of one file into its sibling class folder `label`."""
    return plan_sort([(path, label, 1.0)], os.path.dirname(os.path.dirname(path)), move=True)


def sort_question(plan, min_confidence: float, note: str = "") -> str:
    """The sort's dry run in words. The 'unsure' folder is named only when there is a threshold: with 0 nothing
    is under it ("Images under 0% confidence go to 'unsure'" promised a folder that never fills)."""
    threshold = (f"Images under {min_confidence:.0%} confidence go to '{UNSURE}'." if min_confidence > 0 else
                 f"No confidence threshold (Min confidence is 0): every image goes to its predicted class, none to "
                 f"'{UNSURE}'.")
    return (f"{plan.describe()}{note}\n\n{threshold} Files are copied (the originals stay), never overwritten. "
            f"Edit → Undo (Ctrl+Z) removes the copies again; the undo log is kept in {journal_dir(plan.out)}.")


def sort_job(cancel, plan, kind: str):
    """Carries out a sort or a move (`kind`), journalled; returns its SortResult (with the journal's log)."""
    from vitstudio.core.folder.sorting import apply_sort

    return apply_sort(plan, kind=kind, cancel=cancel)


def undo_job(cancel, log):
    """Undoes the sort or move journalled in `log`; returns its UndoResult."""
    from vitstudio.core.folder.sorting import undo_sort

    return undo_sort(log)
