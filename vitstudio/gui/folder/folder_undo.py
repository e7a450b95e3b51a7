"""The Folder tab's undoable actions as commands on the app's one undo stack (vitstudio/app/undo.py: Edit → Undo /
Redo, the toolbar's Undo): a sort into folders, a label-review move, an exclusion from training.

A sort or a move is carried out — and undone — through the same journal the command line uses (`apply_sort`,
`undo_sort`, kept in the app's data folder): `redo` starts the file job, `undo` starts the journal's undo, both
as long jobs; `FileOperations` (file_operations.py) refuses another undo or redo while one runs. Undo never
destroys a file the user changed since (the journal checks sizes and hashes). An exclusion only edits the list
kept in the data folder."""

from __future__ import annotations

import os
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QListWidget, QListWidgetItem


@dataclass
class ReviewItemMemo:
    """A label-review item taken off the list, to put back where it was when its action is undone."""

    row: int
    text: str
    data: object
    tooltip: str
    icon: QIcon

    @property
    def path(self) -> str:
        return self.data[0] if isinstance(self.data, (list, tuple)) else self.data

    @classmethod
    def take(cls, widget: QListWidget, item: QListWidgetItem) -> ReviewItemMemo:
        return cls(widget.row(item), item.text(), item.data(Qt.UserRole), item.toolTip(), item.icon())

    def find(self, widget: QListWidget) -> QListWidgetItem | None:
        for i in range(widget.count()):
            if widget.item(i).data(Qt.UserRole) == self.data:
                return widget.item(i)
        return None

    def remove_from(self, widget: QListWidget) -> None:
        """Out of the list, leaving nothing selected: the next doubtful image selected by itself was moved by a
        second click on the same button."""
        item = self.find(widget)
        if item is not None:
            widget.takeItem(widget.row(item))
            widget.setCurrentRow(-1)

    def put_back(self, widget: QListWidget) -> None:
        if self.find(widget) is not None:
            return
        item = QListWidgetItem(self.icon, self.text)
        item.setData(Qt.UserRole, self.data)
        item.setToolTip(self.tooltip)
        widget.insertItem(min(self.row, widget.count()), item)
        widget.setCurrentItem(item)


class FileOperationCommand:
    """A sort (copies) or a label-review move, journalled; `log` is the journal of its last run."""

    def __init__(self, operations, plan, text: str, kind: str = "sort", memo: ReviewItemMemo | None = None) -> None:
        self.text = text
        self.operations, self.plan, self.kind, self.memo = operations, plan, kind, memo
        self.log: str | None = None

    def redo(self) -> None:
        self.operations.run_file_operation(self, undo=False)

    def undo(self) -> None:
        self.operations.run_file_operation(self, undo=True)


class ExclusionCommand:
    """Leave one image of a dataset out of training (the list in the data folder; the dataset is not touched)."""

    def __init__(self, operations, dataset: str, memo: ReviewItemMemo) -> None:
        self.text = f"Exclude {os.path.basename(memo.path)} from training"
        self.operations, self.dataset, self.memo = operations, dataset, memo

    def redo(self) -> None:
        self.operations.set_excluded(self.dataset, self.memo, True)

    def undo(self) -> None:
        self.operations.set_excluded(self.dataset, self.memo, False)
