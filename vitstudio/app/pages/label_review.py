"""The Folder tab's Label review page, Qt-free: the images whose label the model doubts (cleanlab's count, how good
the predictions behind it are, and when those are too weak for the count to mean much), most doubtful first, and what
the user does with each — move it to the suggested class (a file move, or the Labels page's label when it was given
there: the file stays), leave it out of training, keep it as labelled — the first two commands on the app's one undo
stack, which put the image back on the list when undone. The exclusions of the dataset open are remembered beside it
and follow the files a move relocates; "Retrain with these fixes" hands them to training. Nothing of earlier results
stays when they go."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from vitstudio.core.files import shown_path

from ..evented import Event, EventedModel
from ..folder_files import read_exclusions, write_exclusions
from . import PageEntry

SHOWN = 200  # the most doubtful images listed


def review_summary(issues) -> str:
    """cleanlab's count, how good the predictions behind it are, and when that is too weak for the count to mean
    much, a warning beside it."""
    from vitstudio.core.folder.label_review import estimated_wrong, probe_accuracy

    if not issues:
        return ("No labels were reviewed: the review needs a folder of class folders (or labels given on the Labels "
                "tab) and a model.")
    probe = probe_accuracy(issues)
    text = (f"cleanlab estimates {estimated_wrong(issues)} of {len(issues)} labels are wrong (⚑, most doubtful "
            f"first); the probe's {probe.describe()}.")
    return text + (f"\n⚠ The count means little: {probe.caveat()}." if probe.weak else "")


@dataclass(frozen=True)
class ReviewMemo:
    """An image taken off the list, put back where it was when its action is undone (on the list of the review it
    was taken from: another review's list takes nothing back)."""

    review: LabelReviewModel
    index: int
    issue: object  # its LabelIssue
    listing: int  # which list it was on (LabelReviewModel.listing)

    @property
    def path(self) -> str:
        return self.issue.path

    def remove(self) -> None:
        self.review.take_off(self)

    def put_back(self) -> None:
        self.review.put_back(self)


class ExclusionCommand:
    """Leave one image of a dataset out of training (the list in the data folder; the dataset is not touched)."""

    def __init__(self, review: LabelReviewModel, dataset: str, memo: ReviewMemo) -> None:
        self.text = f"Exclude {os.path.basename(memo.path)} from training"
        self.review, self.dataset, self.memo = review, dataset, memo

    def redo(self) -> None:
        self.review.set_excluded(self.dataset, self.memo, True)

    def undo(self) -> None:
        self.review.set_excluded(self.dataset, self.memo, False)


class LabelReviewModel(EventedModel):
    changed = Event("the images listed, the exclusions or what can be done changed: draw again")
    picked = Event("the image listed that the buttons act on (its index), or None")
    show_requested = Event("a review arrived: the page asks to be the one in sight")
    retrain_requested = Event("the dataset folder and the files to leave out: a training run with the fixes")

    title = "Label review"
    tooltip = "Images whose folder's label the model doubts"

    def __init__(self, folder) -> None:
        self.folder = folder
        self.issues: list = []  # the doubtful LabelIssues listed, most doubtful first
        self.summary = ""  # cleanlab's estimate in words ("": no review yet)
        self.current: int | None = None  # the index listed that Move, Exclude and Keep act on
        self.excluded: set[str] = set()  # left out of the next training run (remembered beside the dataset)
        self.listing = 0  # counts the lists shown, so an undo puts an image back only on its own list
        folder.results_changed.connect(self.show)
        folder.review_ready.connect(self._on_review)
        folder.files.relocated.connect(self._follow_exclusions)

    def show(self, results) -> None:
        """Other results (or none): no list; the exclusions of the dataset now open, as remembered."""
        dataset = self.folder.folder
        self.excluded = set(read_exclusions(dataset)) if results is not None and dataset else set()
        self._list([], "")

    def _on_review(self, report) -> None:
        self.show_issues(report.label_issues)
        self.show_requested.emit()

    def show_issues(self, issues) -> None:
        """The review's issues: those cleanlab flags or where the probe suggests another class, the excluded ones
        left out, the most doubtful first and picked, ready to act on."""
        listed = [i for i in issues if i.doubtful and i.path not in self.excluded][:SHOWN]
        self._list(listed, review_summary(issues))

    def _list(self, issues: list, summary: str) -> None:
        self.issues, self.summary, self.listing = list(issues), summary, self.listing + 1
        self.current = 0 if self.issues else None
        self.changed.emit()

    # -- what the buttons act on --------------------------------------------------------------------------------
    def pick(self, index: int | None) -> None:
        index = index if index is not None and 0 <= index < len(self.issues) else None
        if index != self.current:
            self.current = index
            self.picked.emit(index)

    def current_issue(self):
        return self.issues[self.current] if self.current is not None else None

    def can_retrain(self) -> bool:
        results = self.folder.results
        has = results is not None and len(results) > 0 and self.folder.folder is not None
        return has and bool(self.issues or self.excluded)

    def _memo(self, issue) -> ReviewMemo:
        return ReviewMemo(self, self.issues.index(issue), issue, self.listing)

    def keep(self) -> None:
        """Keep the current image as labelled: off the list."""
        issue = self.current_issue()
        if issue is not None:
            self.take_off(self._memo(issue))

    def exclude(self) -> None:
        """Leave the current image out of training: undoable, and remembered for this dataset."""
        issue, dataset = self.current_issue(), self.folder.folder
        if issue is not None and dataset:
            self.folder.undo.push(ExclusionCommand(self, dataset, self._memo(issue)))

    def relabel(self, path: str, label: str, ask: Callable[[str, str], object | None]) -> None:
        """`path` to the class `label`: when its label was given on the Labels page, that label changes there (the
        file stays in its folder); else the file moves into its sibling class folder `label`, if `ask(path, label)`
        — the face's question — returns the move's plan (`folder_files.move_plan`). Both undoable."""
        issue = next((i for i in self.issues if i.path == path), None)
        memo = self._memo(issue) if issue is not None else None
        labels = self.folder.labels
        if labels is not None and path in labels.labels:
            labels.label([path], label, memo)
            self.folder.app.message.emit("info", f"{shown_path(path)} labelled '{label}' here (the file stays in its "
                                                 "folder; Edit → Undo takes it back).")
            return
        plan = ask(path, label)
        if plan is not None:
            self.folder.files.move_reviewed(plan, path, label, memo)

    def relabel_current(self, ask: Callable[[str, str], object | None]) -> None:
        """The current image to its suggested class (`relabel`)."""
        issue = self.current_issue()
        if issue is not None:
            self.relabel(issue.path, issue.suggested, ask)

    def retrain(self) -> None:
        if self.can_retrain():
            self.retrain_requested.emit(self.folder.folder, sorted(self.excluded))

    # -- the list, as commands change it ------------------------------------------------------------------------
    def take_off(self, memo: ReviewMemo) -> None:
        """Off the list, leaving nothing picked: the next doubtful image picked by itself was moved by a second click
        on the same button."""
        if memo.listing == self.listing and memo.issue in self.issues:
            self.issues.remove(memo.issue)
            self.current = None
            self.changed.emit()

    def put_back(self, memo: ReviewMemo) -> None:
        if memo.listing == self.listing and memo.issue not in self.issues:
            self.issues.insert(min(memo.index, len(self.issues)), memo.issue)
            self.current = self.issues.index(memo.issue)
            self.changed.emit()

    def set_excluded(self, dataset: str, memo: ReviewMemo, excluded: bool) -> None:
        if dataset != self.folder.folder or self.folder.results is None:  # another folder is open now: only its
            kept = set(read_exclusions(dataset))  # remembered list changes
            write_exclusions(dataset, kept | {memo.path} if excluded else kept - {memo.path})
            return
        if excluded:
            self.excluded.add(memo.path)
            self.take_off(memo)
        else:
            self.excluded.discard(memo.path)
            self.put_back(memo)
        write_exclusions(dataset, self.excluded)
        self.changed.emit()

    def _follow_exclusions(self, moves: dict[str, str]) -> None:
        moved = {p for p in self.excluded if p in moves}
        if moved:
            self.excluded = (self.excluded - moved) | {moves[p] for p in moved}
            if self.folder.folder:
                write_exclusions(self.folder.folder, self.excluded)
            self.changed.emit()


PAGE = PageEntry("review", "Clean", LabelReviewModel, rank=10)
