"""Pages listed by group beside the page shown (as a settings dialog lists its sections): any number of pages, each
title whole, in a narrow column — a tab bar held nine titles at 1280×720 only by shortening them. The column is as
wide as its longest title and scrolls when the groups are taller than the room there is.

Each page sits in a scroll area (as the main tabs' pages do): the widest page does not set the whole window's width,
it scrolls when the side is narrower than it. `currentWidget()`, `setCurrentWidget()`, `indexOf()`, `count()`,
`widget(i)` and `tabText(i)` speak of the pages themselves as a QTabWidget's do, so a caller that showed a tab shows
a page the same way."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QStackedWidget, QTreeWidget, QTreeWidgetItem, QWidget

from .scrolling_tabs import scrolling

PAGE_ROLE = Qt.UserRole  # a page item's index in the stack (group items hold none)


class GroupedPagesWidget(QWidget):
    currentChanged = Signal(int)  # noqa: N815 (QTabWidget's name): the index of the page now shown

    def __init__(self, groups: tuple[str, ...], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.nav = QTreeWidget()
        self.nav.setHeaderHidden(True)
        self.nav.setIndentation(10)
        self.nav.setRootIsDecorated(False)
        self.nav.setSelectionMode(QAbstractItemView.SingleSelection)
        self.nav.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.stack = QStackedWidget()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.nav)
        layout.addWidget(self.stack, 1)
        bold = QFont(self.font())
        bold.setBold(True)
        self.groups: dict[str, QTreeWidgetItem] = {}
        for name in groups:
            item = QTreeWidgetItem(self.nav, [name])
            item.setFlags(Qt.ItemIsEnabled)  # a heading: not a page
            item.setFont(0, bold)
            item.setExpanded(True)
            self.groups[name] = item
        self._items: list[QTreeWidgetItem] = []  # per page, in the stack's order
        self._pages: list[QWidget] = []  # the pages (the stack holds the scroll areas around them)
        self.nav.currentItemChanged.connect(self._on_item)
        self._fit_width()

    def addTab(self, page: QWidget, title: str, group: str, tooltip: str = "") -> int:  # noqa: N802
        """`page` listed under `group` as `title` (its tooltip: the whole name and what it shows); its index."""
        index = self.stack.addWidget(scrolling(page))
        self._pages.append(page)
        item = QTreeWidgetItem(self.groups[group], [title])
        item.setData(0, PAGE_ROLE, index)
        item.setToolTip(0, tooltip or title)
        self._items.append(item)
        self._fit_width()
        if index == 0:
            self.nav.setCurrentItem(item)
        return index

    def _fit_width(self) -> None:
        """As wide as the longest title (headings included), never wider: the pages keep the rest."""
        self.nav.resizeColumnToContents(0)
        self.nav.setFixedWidth(self.nav.sizeHintForColumn(0) + self.nav.indentation() + 2 * self.nav.frameWidth() + 4)

    def _on_item(self, item: QTreeWidgetItem | None, _previous) -> None:
        index = item.data(0, PAGE_ROLE) if item is not None else None
        if index is not None and index != self.stack.currentIndex():
            self.stack.setCurrentIndex(index)
            self.currentChanged.emit(index)

    # -- as a QTabWidget -----------------------------------------------------------------------------------------
    def count(self) -> int:
        return self.stack.count()

    def widget(self, index: int) -> QWidget | None:
        return self._pages[index] if 0 <= index < len(self._pages) else None

    def indexOf(self, page: QWidget) -> int:  # noqa: N802
        return self._pages.index(page) if page in self._pages else -1

    def currentWidget(self) -> QWidget | None:  # noqa: N802
        return self.widget(self.stack.currentIndex())

    def currentIndex(self) -> int:  # noqa: N802
        return self.stack.currentIndex()

    def setCurrentIndex(self, index: int) -> None:  # noqa: N802
        self.nav.setCurrentItem(self._items[index])

    def setCurrentWidget(self, page: QWidget) -> None:  # noqa: N802
        self.setCurrentIndex(self.indexOf(page))

    def tabText(self, index: int) -> str:  # noqa: N802
        return self._items[index].text(0)

    def tabToolTip(self, index: int) -> str:  # noqa: N802
        return self._items[index].toolTip(0)

    def group_of(self, index: int) -> str:
        return self._items[index].parent().text(0)

    def title_rect(self, index: int):
        """Where page `index`'s title is drawn in the list (the viewport's coordinates)."""
        return self.nav.visualItemRect(self._items[index])
