"""The Folder tab's side: every registered page (gui/folder/pages/), each a view of a Qt-free model built on the
Folder model (it follows the folder's results itself) that knows nothing of the panel."""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QWidget

from vitstudio.app.pages import GROUPS, page_entries

from ..common.grouped_pages import GroupedPagesWidget
from .pages import page_views


class FolderSideWidget(GroupedPagesWidget):
    def __init__(self, panel) -> None:
        super().__init__(GROUPS)  # every page listed by group, its title whole, however many pages there are
        views = page_views()  # each page's view, by its entry's id; its model is the App's (it follows the folder)
        self.pages = [views[entry.id](panel.app.pages[entry.id]) for entry in page_entries()]
        groups = {entry.id: entry.group for entry in page_entries()}
        for page in self.pages:
            self.addTab(page, page.model.title, groups[page.page_id], page.model.tooltip)
        for page in self.pages:  # a page that offers to explain an image: the Attention tab shows it
            wants = getattr(page, "explain_requested", None)
            if wants is not None:
                wants.connect(panel.open_in_explorer)
            if hasattr(page.model, "show_requested"):  # a page whose model asks to be in sight (a result arrived)
                page.model.show_requested.connect(partial(self.show_page, page))
            for key, act in getattr(page, "table_keys", dict)().items():  # keys a page offers over the table
                QShortcut(QKeySequence(key), panel.table, context=Qt.WidgetWithChildrenShortcut).activated.connect(act)
        self.setCurrentWidget(self.pages[0])  # the first group's first page when the tab opens

    def page(self, page_id: str) -> QWidget:
        """The registered page of that id (its view; `.model` is the App's model of it)."""
        return next(page for page in self.pages if page.page_id == page_id)

    def show_page(self, page: QWidget) -> None:
        self.setCurrentWidget(page)
