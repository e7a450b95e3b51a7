"""The Folder tab's two control rows: actions (open, cancel, sort, undo, export, review, tags and views + the review's
threshold) and the table's filters (predicted class, minimum confidence, correctness, tag, follow the map's box),
with the folder they apply to and how many rows they let through. Only widgets: the panel connects them."""

from __future__ import annotations

import html
import os

from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vitstudio.gui.common.flow_layout import FlowLayout

CORRECTNESS = (("all images", None), ("correct", True), ("mistakes", False))


def _labelled(text: str, control: QWidget) -> QWidget:
    """A control with its label, kept on one line when the row wraps."""
    pair = QWidget()
    layout = QHBoxLayout(pair)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(4)
    layout.addWidget(QLabel(text))
    layout.addWidget(control)
    return pair


def _wrapping_row(widgets) -> QWidget:
    """A row that never widens the tab and hides nothing: what does not fit wraps onto another line (at 1280×720
    with the model card open the Folder tab is about 800 px wide; the two rows want about 950)."""
    row = QWidget()
    layout = FlowLayout(row)
    for w in widgets:
        layout.addWidget(w)
    return row


class FolderToolbarWidget(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._build_actions()
        self._build_filters()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._action_row())
        layout.addWidget(self._filter_row())

    def _build_actions(self) -> None:
        self.open_button = QPushButton("Open folder…")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.sort_button = QPushButton("Sort into folders…")
        self.undo_button = QPushButton("Undo")  # sorts, moves, exclusions and labels: the tooltip names which
        self.undo_button.setEnabled(False)  # until one of them was done
        self.export_button = QToolButton(text="Export…", popupMode=QToolButton.InstantPopup)  # folder_export.py
        self.review_button = QPushButton("Review labels and duplicates")
        self.tag_button = QToolButton(text="Tag", popupMode=QToolButton.InstantPopup)  # menus: folder_tags.py
        self.views_button = QToolButton(text="Views", popupMode=QToolButton.InstantPopup)
        self.threshold = QDoubleSpinBox(minimum=0.5, maximum=1.0, singleStep=0.005, decimals=3, value=0.5)
        self.threshold.setSpecialValueText("auto")  # the minimum: calibrated on the folder (None)
        self.threshold.setToolTip("Cosine similarity of two images' features at or above which the model counts "
                                  "them as near-duplicates (a near pair needs a hash or the pixels to agree too). "
                                  "auto: calibrated on this folder, 10× closer than its median nearest neighbour.")

    def _build_filters(self) -> None:
        self.predicted = QComboBox()
        self.predicted.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        # never narrower than its longest class: a tight toolbar squeezed it to "all classe" (what does not fit
        # wraps onto another line instead)
        self.predicted.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)
        self.min_conf = QDoubleSpinBox(minimum=0.0, maximum=1.0, singleStep=0.05, decimals=2)
        self.correctness = QComboBox()
        for text, value in CORRECTNESS:
            self.correctness.addItem(text, value)
        self.tag_filter = QComboBox()  # its items: the tag field's choices, the folder's tags (bind)
        self.tag_filter.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.follow_map = QPushButton("Table follows map box")
        self.follow_map.setCheckable(True)
        self.shown = QLabel()  # "N of M shown"
        self.filters_for = QLabel()  # which folder the filters apply to: they are that folder's
        self.filters_text = ""  # shown with the count only: with no results (a new model) there is nothing to filter
        self.reset_button = QPushButton("Reset filters")

    def _action_row(self) -> QWidget:
        return _wrapping_row((self.open_button, self.cancel_button, self.sort_button, self.undo_button,
                                 self.export_button, self.review_button, self.tag_button, self.views_button,
                                 _labelled(" near-duplicate cosine", self.threshold)))

    def _filter_row(self) -> QWidget:
        widgets = [self.shown, self.filters_for]
        for label, w in (("Predicted", self.predicted), ("Min confidence", self.min_conf), ("Show", self.correctness),
                         ("Tag", self.tag_filter)):
            widgets.append(_labelled(f" {label}", w))
        return _wrapping_row((*widgets, self.follow_map, self.reset_button))

    def show_filters_of(self, folder: str) -> None:
        """The folder the filters now apply to (their values are the Folder state's)."""
        name = os.path.basename(os.path.normpath(folder)) or folder
        name = name if len(name) <= 28 else name[:12] + "…" + name[-12:]
        self.filters_text = f" · filters of <b>{html.escape(name)}</b>:"
        self.filters_for.setToolTip(folder)
        if self.shown.text():
            self.filters_for.setText(self.filters_text)

    def show_count(self, shown: int | None, total: int = 0) -> None:
        """ "N of M shown" and the folder the filters are of; both empty while there are no results (before a
        folder is scanned, after the model changed): "· filters of colours:" was left there alone."""
        self.shown.setText("" if shown is None else f"<b>{shown}</b> of {total} shown")
        self.filters_for.setText("" if shown is None else self.filters_text)

    def review_threshold(self) -> float | None:
        """The near-duplicate cosine cut, None for "auto" (the spin box's minimum)."""
        value = self.threshold.value()
        return None if value <= self.threshold.minimum() else value
