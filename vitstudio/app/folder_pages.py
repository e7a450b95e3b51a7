"""The Folder tab's registered pages, Qt-free: one entry per page (its id, title, group and model class). The App
builds every page's model on the Folder model; the window finds each page's view by the entry's id
(gui/folder/pages/) and knows no page by name. A new page is a model module, an entry here, a view module and their
tests."""

from __future__ import annotations

from dataclasses import dataclass

GROUPS = ("Explore", "Clean", "Label", "Learn")  # the side's navigation, in this order


@dataclass(frozen=True)
class PageEntry:
    id: str  # what its view is registered under (gui/folder/pages/)
    group: str  # one of GROUPS
    model: type  # built as `model(folder)` on the Folder model (a `folder_page.FolderPageModel`)


def page_entries() -> tuple[PageEntry, ...]:
    """Every registered page, in the order they are listed within their group."""
    from .class_counts import ClassCounts
    from .duplicates_page import DuplicatesModel
    from .folder_layers import LayersModel
    from .paint_page import PaintPageModel
    from .similar_images import SimilarImagesModel

    return (PageEntry("similar", "Explore", SimilarImagesModel), PageEntry("counts", "Explore", ClassCounts),
            PageEntry("duplicates", "Clean", DuplicatesModel), PageEntry("paint", "Label", PaintPageModel),
            PageEntry("layers", "Learn", LayersModel))
