"""The Folder tab's pages, Qt-free: each module of this package is one page's model and names its entry as `PAGE`
(its id, group and model class). The App builds every page's model on the Folder model; the window finds each page's
view by the entry's id (gui/folder/pages/) and knows no page by name. A new page is a model module here, a view module
there and their tests — no edit elsewhere."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

GROUPS = ("Explore", "Clean", "Label", "Learn")  # the side's navigation, in this order


@dataclass(frozen=True)
class PageEntry:
    id: str  # what its view is registered under (gui/folder/pages/)
    group: str  # one of GROUPS
    model: type  # built as `model(folder)` on the Folder model (a `folder_page.FolderPageModel`)
    rank: int = 50  # its place within its group (smaller first; then by id)

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"page {self.id!r}: group {self.group!r} is not one of {', '.join(GROUPS)}")


def page_entries() -> tuple[PageEntry, ...]:
    """Every page module's entry, by group (in GROUPS' order), then rank, then id."""
    entries = [importlib.import_module(f"{__name__}.{info.name}").PAGE for info in pkgutil.iter_modules(__path__)]
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two pages share an id: {sorted(i for i in ids if ids.count(i) > 1)}")
    return tuple(sorted(entries, key=lambda e: (GROUPS.index(e.group), e.rank, e.id)))
