"""The Folder tab's filters as view-state fields (predicted class, minimum confidence, correctness, whether the
table follows the map's box). The toolbar's widgets write into the panel's ViewState and mirror it, so the
filters can be saved, restored and reset as data, and a reset can never leave a widget showing a stale value."""

from __future__ import annotations

from PySide6.QtCore import QSignalBlocker

from ..viewstate import Field

FILTER_FIELDS = dict(
    predicted=Field(None, str, help="a predicted class shown in the table"),
    min_conf=Field(0.0, float, check=lambda v: 0.0 <= v <= 1.0, help="0 ≤ confidence ≤ 1"),
    correct=Field(None, bool),  # None: all images; True: correct ones; False: mistakes
    follow_map=False,
)
FILTER_DEFAULTS = {name: (spec.default if isinstance(spec, Field) else spec) for name, spec in FILTER_FIELDS.items()}


def bind_filters(toolbar, view_state) -> None:
    """Widgets → view state on every user change; view state → widgets (quietly) on every state change."""
    toolbar.predicted.currentIndexChanged.connect(
        lambda _i: view_state.update(predicted=toolbar.predicted.currentData()))
    toolbar.correctness.currentIndexChanged.connect(
        lambda _i: view_state.update(correct=toolbar.correctness.currentData()))
    toolbar.min_conf.valueChanged.connect(lambda value: view_state.update(min_conf=value))
    toolbar.follow_map.toggled.connect(lambda on: view_state.update(follow_map=on))

    def mirror(name: str, value) -> None:
        if name == "predicted":
            _select_data(toolbar.predicted, value)
        elif name == "correct":
            _select_data(toolbar.correctness, value)
        elif name == "min_conf" and toolbar.min_conf.value() != value:
            with QSignalBlocker(toolbar.min_conf):
                toolbar.min_conf.setValue(value)
        elif name == "follow_map" and toolbar.follow_map.isChecked() != value:
            with QSignalBlocker(toolbar.follow_map):
                toolbar.follow_map.setChecked(value)

    view_state.connect(mirror)


def _select_data(combo, value) -> None:
    index = combo.findData(value) if value is not None else 0
    if index >= 0 and combo.currentIndex() != index:
        with QSignalBlocker(combo):
            combo.setCurrentIndex(index)
