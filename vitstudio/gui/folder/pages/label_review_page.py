"""The Label review page: the images whose label the model doubts, most doubtful first, as a grid of thumbnails
(relabel, exclude, keep, retrain with the fixes; a double-click explains one in the Attention tab), drawn from its
model (`vitstudio.app.pages.label_review.LabelReviewModel`)."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QListWidgetItem, QPushButton, QVBoxLayout, QWidget

from vitstudio.app.pages.label_review import LabelReviewModel

from ... import workers
from ...common.flow_layout import wrapping_row
from ..folder_review import icon_list, item_path, load_icons
from ..folder_sorting import ask_move

REVIEW_HINT = ("Review labels and duplicates (the toolbar) lists here the images whose label the model doubts, most "
               "doubtful first, to move, exclude from training or keep.")


class LabelReviewPage(QWidget):
    page_id = "review"
    explain_requested = Signal(str)  # a path to explain in the Attention tab

    def __init__(self, model: LabelReviewModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.list = icon_list()
        self.summary = QLabel(REVIEW_HINT)  # cleanlab's estimate of how many labels are wrong (before: what to do)
        self.summary.setWordWrap(True)
        self.relabel_button = QPushButton("Move to the suggested class…")
        self.exclude_button = QPushButton("Exclude from training")
        self.keep_button = QPushButton("Keep as labelled")
        self.retrain_button = QPushButton("Retrain with these fixes…")
        self._icons = workers.KeyedSlot(workers.LONG)
        self._drawing = False  # the list is being filled: its row changes are not the user's picks
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.list, 1)
        # a row that wraps: beside the table at 1280×720 the page is ~360 px wide, two buttons a row wanted 468
        layout.addWidget(wrapping_row((self.relabel_button, self.exclude_button, self.keep_button,
                                       self.retrain_button)))
        self.list.itemDoubleClicked.connect(lambda item: self.explain_requested.emit(item_path(item)))
        self.list.currentRowChanged.connect(self._on_row)
        self.relabel_button.clicked.connect(lambda: model.relabel_current(self._ask_move))
        self.exclude_button.clicked.connect(model.exclude)
        self.keep_button.clicked.connect(model.keep)
        self.retrain_button.clicked.connect(model.retrain)
        model.changed.connect(self.draw)
        model.picked.connect(self._show_picked)
        self.draw()

    def _ask_move(self, path: str, label: str):
        return ask_move(self, path, label)

    def draw(self) -> None:
        """The model's list, each issue's caption and tooltip; icons already decoded are kept, the others are
        decoded in a worker."""
        model = self.model
        self.summary.setText(model.summary or REVIEW_HINT)
        icons = {item_path(self.list.item(i)): self.list.item(i).icon() for i in range(self.list.count())}
        self._drawing = True
        try:
            self.list.clear()
            for issue in model.issues:
                mark = "⚑ " if issue.flagged else ""
                item = QListWidgetItem(f"{mark}{issue.given} → {issue.suggested}\n{os.path.basename(issue.path)}")
                item.setData(Qt.UserRole, (issue.path, issue.suggested))
                item.setToolTip(f"{issue.path}\nlabel quality {issue.quality:.3f}, p(given) {issue.p_given:.2f}")
                if issue.path in icons and not icons[issue.path].isNull():
                    item.setIcon(icons[issue.path])
                self.list.addItem(item)
            self.list.setCurrentRow(-1 if model.current is None else model.current)
        finally:
            self._drawing = False
        missing = [i.path for i in model.issues if i.path not in icons or icons[i.path].isNull()]
        if missing:
            load_icons(self._icons, self.list, missing)
        self._buttons()

    def _on_row(self, row: int) -> None:
        if not self._drawing:
            self.model.pick(row if row >= 0 else None)

    def _show_picked(self, index: int | None) -> None:
        if self.list.currentRow() != (-1 if index is None else index):
            self.list.setCurrentRow(-1 if index is None else index)
        self._buttons()

    def _buttons(self) -> None:
        """Move, exclude and keep act on the image picked: enabled only while one is."""
        picked = self.model.current is not None
        for w in (self.relabel_button, self.exclude_button, self.keep_button):
            w.setEnabled(picked)
        self.retrain_button.setEnabled(self.model.can_retrain())
        self.retrain_button.setText(f"Retrain with these fixes ({len(self.model.excluded)} excluded)…")


PAGE = LabelReviewPage
