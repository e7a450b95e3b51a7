"""The Folder tab's filter controls, the map's colouring, its lasso switch and the Table | Gallery switch bound to
their fields of `FolderState` (vitstudio/app/folder_states.py), so a reset or a restore can never leave a widget
showing a stale value."""

from __future__ import annotations

from ..common.bind import bind


def bind_filters(toolbar, map_tab, browse, view_state) -> None:
    """Each filter control, the map's colouring, its lasso switch and the gallery's switch bound to its field
    (gui/common/bind.py); the map's view box and the table-or-gallery stack follow their switches."""
    for widget, name in ((toolbar.predicted, "predicted"), (toolbar.correctness, "correct"),
                         (toolbar.min_conf, "min_conf"), (toolbar.follow_map, "follow_map"),
                         (toolbar.tag_filter, "tag"),
                         (map_tab.colour_by, "colour_by"), (map_tab.lasso_button, "lasso"),
                         (browse.gallery_button, "gallery")):
        bind(widget, view_state, name)
    view_state.events.lasso.connect(map_tab.map.set_lasso)
    view_state.events.gallery.connect(browse.show_gallery)
