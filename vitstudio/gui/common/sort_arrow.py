"""A table header's sort arrow points the way its column reads: ▲ over values that rise down the rows (ascending),
▼ over values that fall. QHeaderView hands the style SortDown for an ascending column and Fusion on Linux draws
SortDown as ▼ (GNOME's convention), so a table sorted most-first wore ▲, read as least-first; other styles draw the
reverse. Drawn here from the order itself, every style shows the same arrow."""

from __future__ import annotations

from PySide6.QtWidgets import QProxyStyle, QStyle, QStyleOptionHeader

# QHeaderView's mapping (qheaderview.cpp: AscendingOrder → SortDown): the arrow for each value it hands the style
_ARROW = {QStyleOptionHeader.SortIndicator.SortDown: QStyle.PE_IndicatorArrowUp,
          QStyleOptionHeader.SortIndicator.SortUp: QStyle.PE_IndicatorArrowDown}


def sort_arrow(option) -> QStyle.PrimitiveElement | None:
    """The arrow a header section's option asks for: ▲ (PE_IndicatorArrowUp) for ascending, ▼ for descending."""
    return _ARROW.get(option.sortIndicator) if isinstance(option, QStyleOptionHeader) else None


class SortArrowStyle(QProxyStyle):
    """The style it wraps, with the header's sort arrow drawn as the order reads."""

    def drawPrimitive(self, element, option, painter, widget=None):  # noqa: N802 (Qt's name)
        arrow = sort_arrow(option) if element == QStyle.PE_IndicatorHeaderArrow else None
        if arrow is None:
            return super().drawPrimitive(element, option, painter, widget)
        return super().drawPrimitive(arrow, option, painter, widget)
