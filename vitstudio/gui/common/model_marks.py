"""The model bar's marks (● weights on this machine, ○ downloadable from the hub, · no weights, ★ the bundled demo)
on the other lists of the same models: the Training tab's base model and Compare's second model. There they are
icons, so an item's text stays the spec those fields read and the user types (the model bar keeps the glyph in its
text and maps it back itself)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QComboBox

MODEL_LIST_WIDTH = 460  # px of an open list of models: "aimv2_1b_patch14_224.apple_pt" and run paths whole at
# 1280×720, where the Compare and Training boxes are ~190 px wide (elided, names read "aimv2_1b_p…4.apple_pt")
MEANINGS = {"★": "the bundled demo model", "●": "weights available offline", "○": "downloadable from the hub once",
            "·": "no pretrained weights"}


def mark_icon(mark: str, size: int = 14) -> QIcon:
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.transparent)
    painter = QPainter(pixmap)
    font = QFont()
    font.setPixelSize(size - 2)
    painter.setFont(font)
    painter.drawText(pixmap.rect(), Qt.AlignCenter, mark)
    painter.end()
    return QIcon(pixmap)


def mark_like_the_model_bar(combo: QComboBox, marks: dict[str, str]) -> None:
    """Give each item of `combo` (its text a spec) the mark `marks` has for it, as an icon with its meaning as the
    tooltip. What the field holds stays: an editable combo shows its current item's text again when that item's data
    changes (Compare's empty second-model field showed the first model listed, as if chosen)."""
    text = combo.currentText()
    icons = {mark: mark_icon(mark) for mark in set(marks.values())}
    for index in range(combo.count()):
        mark = marks.get(combo.itemText(index))
        if mark in icons:
            combo.setItemIcon(index, icons[mark])
            combo.setItemData(index, MEANINGS.get(mark, ""), Qt.ToolTipRole)
    if combo.isEditable():
        combo.setEditText(text)


def list_beside_the_demo(combo: QComboBox, specs: list[str], marks: dict[str, str]) -> None:
    """`specs` new to `combo` (a run just trained), after the bundled demo as the model bar lists them, marked; what
    the field holds stays."""
    text = combo.currentText()
    first = 1 if combo.count() and marks.get(combo.itemText(0)) == "★" else 0
    for spec in specs:
        if combo.findText(spec) < 0:
            combo.insertItem(first, spec)
    mark_like_the_model_bar(combo, marks)
    combo.setEditText(text)
