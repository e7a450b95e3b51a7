"""The Folder tab's registered side pages: each module here is one page's view and names it as `PAGE`, a widget
class drawn from its Qt-free model (a `vitstudio.app.folder_page.FolderPageModel`, built by the App from the page's
entry in `vitstudio.app.pages`); `PAGE.page_id` is that entry's id. The Folder tab imports none of them by
name."""

from __future__ import annotations

import importlib
import pkgutil


def page_views() -> dict[str, type]:
    """The view class of every page module in this package, by its page's id."""
    views = {}
    for info in pkgutil.iter_modules(__path__):
        view = importlib.import_module(f"{__name__}.{info.name}").PAGE
        views[view.page_id] = view
    return views
