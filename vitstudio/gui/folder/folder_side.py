"""The Folder tab's side: its own pages (map, similar images, label review, duplicates, labels, layers, concepts),
then every registered page (gui/folder/pages/), each a view of a Qt-free model built on the Folder model (it follows
the folder's results itself) that knows nothing of the panel."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTabWidget

from vitstudio.app.folder_pages import page_entries

from .concepts.concepts_tab import ConceptsTab
from .folder_labels import LabelsTab
from .folder_layers import LayersTab
from .folder_map_tab import FolderMapTabWidget
from .folder_review import DuplicatesTab, ReviewTab, SimilarImagesWidget
from .pages import page_views

# the style's tabs, drawn with less side padding (a stylesheet that styles padding alone drops the tab shapes)
TAB_STYLE = ("QTabBar::tab { padding: 4px 6px; margin-right: 1px; border: 1px solid palette(mid); border-bottom: none;"
             " border-top-left-radius: 3px; border-top-right-radius: 3px; background: palette(button); }"
             " QTabBar::tab:selected { background: palette(window); }"
             " QTabBar::tab:!selected { margin-top: 2px; }")


class FolderSideWidget(QTabWidget):
    def __init__(self, panel) -> None:
        # at 1280×720 every tab stays in sight, titles whole (no scroll arrows, no elision)
        super().__init__(usesScrollButtons=False, elideMode=Qt.ElideNone)
        # a tab's side padding halved: eight whole titles kept the side ~550 px wide at 1280×720, and the table
        # beside it cut its confidence column; with the Paint page, 'Duplicates' is 'Copies' (its tooltip whole)
        self.tabBar().setStyleSheet(TAB_STYLE)
        self.map_tab, self.similar_tab = FolderMapTabWidget(), SimilarImagesWidget()
        self.review_tab, self.duplicates = ReviewTab(), DuplicatesTab()
        self.labels_tab, self.layers_tab, self.concepts_tab = LabelsTab(panel), LayersTab(panel), ConceptsTab(panel)
        views = page_views()  # each page's view, by its entry's id; its model is the App's (it follows the folder)
        self.pages = [views[entry.id](panel.app.pages[entry.id]) for entry in page_entries()]
        for tab, title, tooltip in (
                (self.map_tab, "Map", "Map"), (self.similar_tab, "Similar", "Similar images"),
                (self.review_tab, "Review", "Label review"), (self.duplicates, "Copies", "Duplicates"),
                (self.labels_tab, "Labels", "Labels"), (self.layers_tab, "Layers", "Layers"),
                (self.concepts_tab, "Concepts", "Concepts"),
                *((page, page.model.title, page.model.tooltip) for page in self.pages)):
            self.setTabToolTip(self.addTab(tab, title), tooltip)
