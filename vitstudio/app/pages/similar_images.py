"""The Folder tab's Similar images page, Qt-free: the folder's current row (the query) and its nearest images by
cosine of the model's features, as the Folder model finds them (`FolderModel.find_similar` on every row picked).
Nothing of earlier results stays when they go (another model, another folder)."""

from __future__ import annotations

from ..evented import Event, EventedModel
from . import PageEntry


class SimilarImagesModel(EventedModel):
    changed = Event('"query" (a new row: its neighbours follow) or "found"')

    title = "Similar images"
    tooltip = "The images most like the selected one (cosine of the model's features); double-click one to explain it"

    def __init__(self, folder) -> None:
        self.folder = folder
        self.query: int | None = None  # the row whose neighbours are shown
        self.found: list[tuple[str, float]] = []  # (path, cosine similarity), most similar first
        folder.results_changed.connect(self.show)
        folder.row_selected.connect(self._on_row)
        folder.similar_ready.connect(self._on_similar)

    def show(self, _results) -> None:
        """New results or none: no query and no neighbour of the earlier ones stays."""
        self.query, self.found = None, []
        self.changed.emit("query")

    @property
    def query_path(self) -> str | None:
        results = self.folder.results
        return results.paths[self.query] if self.query is not None and results is not None else None

    def _on_row(self, row: int | None) -> None:
        if row is None or self.folder.results is None or row == self.query:
            return
        self.query, self.found = row, []
        self.changed.emit("query")

    def _on_similar(self, row: int, found) -> None:
        if row == self.query:
            self.found = list(found)
            self.changed.emit("found")


PAGE = PageEntry("similar", "Explore", SimilarImagesModel, rank=20)
