"""The Folder tab's filter controls and the Table | Gallery switch bound to their fields of `FolderState`
(vitstudio/app/folder_states.py), so a reset or a restore can never leave a widget showing a stale value."""

from __future__ import annotations

from ..common.bind import bind


def bind_filters(toolbar, browse, view_state) -> None:
    """Each filter control and the gallery's switch bound to its field (gui/common/bind.py); the table-or-gallery
    stack follows its switch. The map's colouring and lasso switch are the Map page's (gui/folder/pages/map_page.py)."""
    for widget, name in ((toolbar.predicted, "predicted"), (toolbar.correctness, "correct"),
                         (toolbar.min_conf, "min_conf"), (toolbar.follow_map, "follow_map"),
                         (toolbar.tag_filter, "tag"),
                         (browse.gallery_button, "gallery")):
        bind(widget, view_state, name)
    view_state.events.gallery.connect(browse.show_gallery)
