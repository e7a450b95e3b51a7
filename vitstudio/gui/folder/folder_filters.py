"""The Folder tab's filter controls and the map's colouring bound to their fields of `FolderState`
(vitstudio/app/folder_states.py), so a reset or a restore can never leave a widget showing a stale value."""

from __future__ import annotations

from ..common.bind import bind


def bind_filters(toolbar, colour_by, view_state) -> None:
    """Each filter control, and the map's colouring, bound to its field (gui/common/bind.py)."""
    for widget, name in ((toolbar.predicted, "predicted"), (toolbar.correctness, "correct"),
                         (toolbar.min_conf, "min_conf"), (toolbar.follow_map, "follow_map"),
                         (colour_by, "colour_by")):
        bind(widget, view_state, name)
