"""Tabs whose pages scroll when the window is smaller than they are.

A QTabWidget is as wide as its widest page, so one wide tab (Compare's toolbar) set the whole window's minimum
size: 1479×639 with the model card, more than a 1280×720 or 1366×768 laptop screen. Here each page sits in its
own scroll area: the window can be as small as the screen, a page that fits shows no scroll bar, and a page
narrower than its own minimum scrolls instead of being squeezed or clipped.

`widget(i)`, `currentWidget()`, `indexOf()` and `setCurrentWidget()` speak of the pages themselves (the panels),
not of the scroll areas around them, so callers never see the wrapping.

A page is held at the tab's size, taller only below its minimum (`FittedPage`): a page holding a word-wrapped label
has a height for its width, and a scroll area sizes such a page to its *preferred* height for the width (a box
layout's height for a width sums its items' hints), so a page that fits in its minimum scrolled anyway (the
Compare tab at 1280×720: 658 px tall in 571, its minimum 438).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QTabWidget, QWidget


def scrolling(page: QWidget, horizontal: bool = True) -> QScrollArea:
    """`page` in a frameless scroll area that resizes it to the space there is (never below its minimum)."""
    area = QScrollArea()
    area.setWidget(page)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    if not horizontal:
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    return area


class FittedPage(QWidget):
    """Holds `page` at its own size: the page's hints without its height for a width, so the scroll area around it
    sizes it to the room there is, down to the page's minimum, and scrolls only below that."""

    def __init__(self, page: QWidget) -> None:
        super().__init__()
        self.page = page
        page.setParent(self)
        page.show()

    def sizeHint(self) -> QSize:
        return self.page.sizeHint()

    def minimumSizeHint(self) -> QSize:
        return self.page.minimumSizeHint().expandedTo(self.page.minimumSize())

    def resizeEvent(self, event) -> None:
        self.page.setGeometry(self.rect())

    def event(self, event) -> bool:
        if event.type() == QEvent.LayoutRequest:  # the page's minimum may have changed: the scroll area asks again
            self.updateGeometry()
        return super().event(event)


class ScrollingTabWidget(QTabWidget):
    def addTab(self, page: QWidget, title: str) -> int:
        return super().addTab(scrolling(FittedPage(page)), title)

    def set_page(self, index: int, page: QWidget) -> None:
        """`page` in place of tab `index`'s page (which is deleted), the tab and its title kept."""
        super().widget(index).setWidget(FittedPage(page))

    def widget(self, index: int) -> QWidget | None:
        area = super().widget(index)
        held = area.widget() if isinstance(area, QScrollArea) else area
        return held.page if isinstance(held, FittedPage) else held

    def currentWidget(self) -> QWidget | None:
        return self.widget(self.currentIndex())

    def indexOf(self, page: QWidget) -> int:
        return next((i for i in range(self.count()) if self.widget(i) is page), -1)

    def setCurrentWidget(self, page: QWidget) -> None:
        self.setCurrentIndex(self.indexOf(page))
