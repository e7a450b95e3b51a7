"""The Folder tab's Duplicates page, Qt-free: the groups of identical copies and near-duplicates the label review
found (a group across train/val is a leak; one across a split the audit made up "would" be), and the group picked,
which the Folder model's table then shows alone. Nothing of earlier results stays when they go."""

from __future__ import annotations

from ..evented import Event, EventedModel
from . import PageEntry


class DuplicatesModel(EventedModel):
    changed = Event("what is shown changed: draw again")

    title = "Duplicates"
    tooltip = "Exact and near duplicates, and leaks across train/val (Review labels and duplicates finds them)"

    def __init__(self, folder) -> None:
        self.folder = folder
        self.groups: tuple = ()  # the review's DuplicateGroups
        self.made_up_split = False  # the folder has no val/: the audit split it at random to look for leaks
        self.reviewed = False  # a review ran on these results (no group then means none was found)
        folder.results_changed.connect(self.show)
        folder.review_ready.connect(self._on_review)

    def show(self, _results) -> None:
        self.groups, self.made_up_split, self.reviewed = (), False, False
        self.changed.emit()

    def _on_review(self, report) -> None:
        self.groups, self.made_up_split, self.reviewed = tuple(report.groups), report.made_up_split, True
        self.changed.emit()

    def pick(self, paths) -> None:
        """A group's images alone in the table, or every image again (None)."""
        self.folder.pick_group(paths)


PAGE = PageEntry("duplicates", "Clean", DuplicatesModel, rank=20)
