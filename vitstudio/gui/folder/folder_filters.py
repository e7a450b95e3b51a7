"""The Folder tab's filters as view-state fields (predicted class, minimum confidence, correctness, whether the
table follows the map's box). Each toolbar control is bound to its field (`bind`), so the filters can be saved,
restored and reset as data, and a reset can never leave a widget showing a stale value."""

from __future__ import annotations

from vitstudio.app.evented import Field, ViewState
from vitstudio.core.fields import Range

from ..common.bind import bind


class FolderView(ViewState):
    """The Folder tab: the model and the paths its results are for, and the table's filters."""

    model: int | None = None
    paths: tuple = ()
    predicted: str | None = Field(None, help="a predicted class shown in the table")
    min_conf: float = Field(0.0, range=Range(0.0, 1.0), help="0 ≤ confidence ≤ 1")
    correct: bool | None = None  # None: all images; True: correct ones; False: mistakes
    follow_map: bool = False


FILTER_DEFAULTS = {name: FolderView().fields()[name].default
                   for name in ("predicted", "min_conf", "correct", "follow_map")}


def bind_filters(toolbar, view_state) -> None:
    """Each filter control bound to its field (gui/common/bind.py)."""
    for widget, name in ((toolbar.predicted, "predicted"), (toolbar.correctness, "correct"),
                         (toolbar.min_conf, "min_conf"), (toolbar.follow_map, "follow_map")):
        bind(widget, view_state, name)
