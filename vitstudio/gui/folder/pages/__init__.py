"""The Folder tab's registered side pages: each module here is one page's view and names it as `PAGE`, a widget
class built from its Qt-free model (`PAGE.Model`, a `vitstudio.app.folder_page.FolderPageModel`). The Folder tab
adds every page found here after its own, in the modules' alphabetical order; it imports none of them by name."""

from __future__ import annotations

import importlib
import pkgutil


def page_views() -> list[type]:
    """The view class of every page module in this package."""
    views = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        views.append(module.PAGE)
    return views
