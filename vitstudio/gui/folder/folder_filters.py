"""The Folder tab's filters as view-state fields (predicted class, minimum confidence, correctness, whether the
table follows the map's box) and what the map is coloured by. Each control is bound to its field (`bind`), so the
filters can be saved, restored and reset as data, and a reset can never leave a widget showing a stale value; the
predicted classes offered are the field's choices, declared from each folder's results."""

from __future__ import annotations

from vitstudio.app.evented import Field, ViewState
from vitstudio.core.fields import Range

from ..common.bind import bind
from .folder_map import COLOUR_BY

ALL_CLASSES = ((None,), ("all classes",))  # the Predicted filter's choice before any results: no filter


class FolderState(ViewState):
    """The Folder tab: the model and the paths its results are for, and the table's filters."""

    model: int | None = None
    paths: tuple = ()
    predicted: str | None = Field(None, choices=ALL_CLASSES[0], labels=ALL_CLASSES[1],
                                  help="a predicted class shown in the table")
    min_conf: float = Field(0.0, range=Range(0.0, 1.0), help="0 ≤ confidence ≤ 1")
    correct: bool | None = None  # None: all images; True: correct ones; False: mistakes
    follow_map: bool = False
    colour_by: str = Field(COLOUR_BY[0], choices=COLOUR_BY)  # the map's colours


def offered_classes(classes) -> dict:
    """The Predicted filter's spec for results predicting `classes`: all of them, or one."""
    return dict(choices=ALL_CLASSES[0] + tuple(classes), labels=ALL_CLASSES[1] + tuple(classes))


FILTER_DEFAULTS = {name: FolderState().fields()[name].default
                   for name in ("predicted", "min_conf", "correct", "follow_map")}


def bind_filters(toolbar, colour_by, view_state) -> None:
    """Each filter control, and the map's colouring, bound to its field (gui/common/bind.py)."""
    for widget, name in ((toolbar.predicted, "predicted"), (toolbar.correctness, "correct"),
                         (toolbar.min_conf, "min_conf"), (toolbar.follow_map, "follow_map"),
                         (colour_by, "colour_by")):
        bind(widget, view_state, name)
