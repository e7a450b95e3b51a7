"""What the Teach tab says and asks, apart from its layout: the export's line, the question before a class is
deleted, the preview's caption, which maps the model offers."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QMessageBox, QWidget

from vitstudio.app.analyses import registry, why_not


def exported_line(exported) -> str:
    """Where the export went and, per artefact, whether it predicts as the preview on every sample."""
    parts = []
    for check in exported.checks:
        if check.not_checked:
            parts.append(f"{check.artefact}: not written ({check.not_checked})")
        elif check.equal:
            parts.append(f"{check.artefact} ✓ (max |Δp| {check.max_abs_diff:.1e})")
        else:
            names = ", ".join(Path(p).name for p, _ in check.differing[:3])
            parts.append(f"{check.artefact} differs on {len(check.differing)} ({names}: {check.differing[0][1]})")
    samples = max((c.samples for c in exported.checks), default=0)
    verdict = "predict as the preview on all" if exported.equal else "checked on"
    return (f"Exported to {exported.folder}: {'; '.join(parts)} — {verdict} {samples} samples (check.json beside "
            f"them).")


def preview_caption() -> QLabel:
    """The top class, frames/s and latency under the preview, in the window's own font 1.2× and bold: drawn into
    the frame, they were scaled down with it to ~6 px."""
    caption = QLabel(objectName="preview_caption")
    font = caption.font()
    font.setPointSizeF(font.pointSizeF() * 1.2)
    font.setBold(True)
    caption.setFont(font)
    caption.setAlignment(Qt.AlignCenter)
    caption.setWordWrap(True)  # a long one ("The head has changed: …") on one line widened the tab
    return caption


def confirm_delete(parent: QWidget, name: str, count: int) -> bool:
    """Asked before a class and its samples (frames recorded exist nowhere else) are deleted."""
    samples = f"its {count} sample{'s' if count != 1 else ''}" if count else "it (it has no samples)"
    answer = QMessageBox.question(parent, f"Delete {name}", f"Delete the class {name} and {samples} from the "
                                  f"project? This cannot be undone.", QMessageBox.Yes | QMessageBox.Cancel,
                                  QMessageBox.Cancel)
    return answer == QMessageBox.Yes


def from_words(result) -> bool:
    """The refit gave the card names' zero-shot head (no samples to fit on yet), not a TeachResult."""
    return getattr(result, "recipe", None) == "words"


def mark_maps(combo: QComboBox, model) -> None:
    """The maps `model` has enabled (the reason as tooltip otherwise); "No map" always; a map it lacks falls back to
    none."""
    for i in range(1, combo.count()):
        reason = why_not(model.model, combo.itemData(i))
        combo.model().item(i).setEnabled(reason is None)
        combo.setItemData(i, reason or registry.get(combo.itemData(i)).help, Qt.ToolTipRole)
    if not combo.model().item(combo.currentIndex()).isEnabled():
        combo.setCurrentIndex(0)
