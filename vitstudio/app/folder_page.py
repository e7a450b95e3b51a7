"""A Folder-tab side page as a protocol (napari's split: the model here, Qt-free; its widget under
gui/folder/pages/). The Folder tab lists the registered pages and knows none of them: it hands each page's model the
folder's results when they arrive, and None when they go (another model, another folder, a failed scan). A new page
is a model module in app/pages/ (its `PAGE` entry), a view module in gui/folder/pages/ (its `PAGE`), and their
tests.

A page's model is built with the Folder model (`Model(folder)`, vitstudio/app/folder_model.py): it follows its
events (`results_changed`, `relocated`, the state's fields) and asks for work through `KeyedJobs` over
`folder.runner`, the runner the face gave the Folder model (the window's pools, or a script's own thread)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from vitstudio.core.folder.results import FolderResults


class FolderPageModel(Protocol):
    """What the Folder tab needs of a page's model."""

    title: str  # the tab's title: a word or two, as the user sees it
    tooltip: str  # the tab's whole name and what it shows

    def __init__(self, folder) -> None:
        """Follow `folder` (a FolderModel): its results through the current model, or None when they go (another
        model, another folder, a failed scan) — then nothing of earlier results may stay."""

    def show(self, results: FolderResults | None) -> None:
        """The folder's results through the current model, or None: nothing of earlier results may stay."""
