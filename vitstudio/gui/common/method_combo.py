"""A list of registered analyses by title (the explorers', Play's and Teach's map boxes), greyed out where one does
not apply to the loaded model, with the reason as tooltip."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from vitstudio.app.analyses import registry, why_not


def method_combo(names: tuple[str, ...]) -> QComboBox:
    """Registered analyses by title; `currentData()` is the registry name."""
    combo = QComboBox()
    for name in names:
        analysis = registry.get(name)
        combo.addItem(analysis.title, name)
        combo.setItemData(combo.count() - 1, analysis.help, Qt.ToolTipRole)
    return combo


def mark_available(combo: QComboBox, model) -> str | None:
    """Grey out the registered analyses in `combo` that do not apply to `model`, with the reason as tooltip.
    Returns the first available method (to fall back on), or None."""
    first = None
    for i in range(combo.count()):
        name = combo.itemData(i)
        reason = why_not(model.model, name)
        item = combo.model().item(i)
        item.setEnabled(reason is None)
        combo.setItemData(i, reason or registry.get(name).help, Qt.ToolTipRole)
        if reason is None and first is None:
            first = name
    return first
