"""The Duplicates page: the review's groups of copies (leaks in red), drawn from its model
(`vitstudio.app.pages.duplicates.DuplicatesModel`); picking a group shows only its images in the table."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from vitstudio.app.pages.duplicates import DuplicatesModel

from ..folder_review import DuplicatesTab


class DuplicatesPage(DuplicatesTab):
    page_id = "duplicates"

    def __init__(self, model: DuplicatesModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.group_picked.connect(model.pick)
        model.changed.connect(self.draw)

    def draw(self) -> None:
        if self.model.reviewed:
            self.show_groups(self.model.groups, self.model.made_up_split)
        else:
            self.clear()


PAGE = DuplicatesPage
