"""The Folder tab's filters as view-state fields (predicted class, minimum confidence, correctness, whether the
table follows the map's box). Each toolbar control is bound to its field (`bind`), so the filters can be saved,
restored and reset as data, and a reset can never leave a widget showing a stale value."""

from __future__ import annotations

from vitstudio.core.fields import Range

from ..common.bind import bind
from ..viewstate import Field

FILTER_FIELDS = dict(
    predicted=Field(None, str, help="a predicted class shown in the table"),
    min_conf=Field(0.0, float, range=Range(0.0, 1.0), help="0 ≤ confidence ≤ 1"),
    correct=Field(None, bool),  # None: all images; True: correct ones; False: mistakes
    follow_map=False,
)
FILTER_DEFAULTS = {name: (spec.default if isinstance(spec, Field) else spec) for name, spec in FILTER_FIELDS.items()}


def bind_filters(toolbar, view_state) -> None:
    """Each filter control bound to its field (gui/common/bind.py)."""
    for widget, name in ((toolbar.predicted, "predicted"), (toolbar.correctness, "correct"),
                         (toolbar.min_conf, "min_conf"), (toolbar.follow_map, "follow_map")):
        bind(widget, view_state, name)
