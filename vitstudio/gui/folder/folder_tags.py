"""The Folder tab's Tag and Views menus (the toolbar's buttons) over the app's `FolderTags`: tag the selection (the
table's selected rows, else what is selected on the map: a box, a lasso) or take a tag off it; restore a saved view
by name, save the filters as one. The Tag filter is bound to the Folder state's `tag` (folder_filters.py)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QInputDialog, QMenu

from vitstudio.app.folder_tags import FolderTags
from vitstudio.core.files import counted

SELECT_FIRST = "Select images first: rows of the table or the gallery, or draw round them on the map."


class FolderTagMenus(QObject):
    def __init__(self, toolbar, tags: FolderTags, selection: Callable[[], list[int]], say: Callable[[str, str], None],
                 parent=None) -> None:
        super().__init__(parent)
        self.toolbar, self.tags, self.selection, self.say = toolbar, tags, selection, say
        tag_menu = QMenu(toolbar.tag_button)
        tag_menu.addAction("Tag the selection…", self.tag_selection)
        tag_menu.addAction("Remove a tag from the selection…", lambda: self.tag_selection(remove=True))
        toolbar.tag_button.setMenu(tag_menu)
        toolbar.tag_button.setToolTip("Tags: any names, several per image, kept in the app's records of the folder")
        self.views_menu = QMenu(toolbar.views_button)
        self.views_menu.aboutToShow.connect(self._fill_views)
        toolbar.views_button.setMenu(self.views_menu)
        toolbar.views_button.setToolTip("A view is the filters (what matches now, not a list of files), saved by name "
                                        "for this folder; `vitstudio views FOLDER` lists them")
        tags.changed.connect(self._enable)
        self._enable()

    def _enable(self) -> None:
        usable = self.tags.folder is not None and self.tags.folder_model.results is not None
        for w in (self.toolbar.tag_button, self.toolbar.views_button, self.toolbar.tag_filter):
            w.setEnabled(usable)

    def tag_selection(self, remove: bool = False) -> None:
        rows = self.selection()
        if not len(rows):
            self.say("warning", SELECT_FIRST)
            return
        names = self.tags.names()
        title = "Remove a tag" if remove else "Tag"
        name, ok = QInputDialog.getItem(self.toolbar, title, f"{title} {counted(len(rows), 'image')}:", names, 0,
                                        not remove)
        if not ok or not name:
            return
        try:
            n = self.tags.tag(rows, name, remove=remove)
        except ValueError as exc:
            self.say("warning", str(exc))
            return
        self.say("info", f"{counted(n, 'image')} {'no longer tagged' if remove else 'tagged'} '{name}'.")

    def _fill_views(self) -> None:
        self.tags.refresh_views()
        menu = self.views_menu
        menu.clear()
        for name in self.tags.views:
            menu.addAction(name, lambda name=name: self.restore(name))
        if self.tags.views:
            menu.addSeparator()
        menu.addAction("Save the filters as a view…", self.save_view)

    def restore(self, name: str) -> None:
        self.tags.restore_view(name)

    def save_view(self) -> None:
        name, ok = QInputDialog.getText(self.toolbar, "Save view", "The filters as a view named:")
        if not ok or not name:
            return
        try:
            self.tags.save_view(name)
        except ValueError as exc:
            self.say("warning", str(exc))
            return
        self.say("info", f"View '{name}' saved: {counted(len(self.tags.current_rules()), 'rule')}.")
