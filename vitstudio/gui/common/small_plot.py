"""A pyqtgraph plot that asks for little room and grows into what there is."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QSize


class SmallPlotWidget(pg.PlotWidget):
    """pyqtgraph asks for 640×480, which makes a page in a scroll area taller than a 720-px screen (a page is sized
    from what its parts ask for); this one asks for 300×200, as the Folder tab's map does."""

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        return QSize(300, 200)
