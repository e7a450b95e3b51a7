"""The Folder tab's Map page, Qt-free: the folder's images placed by their features (the Folder model's map job), what
they are coloured by (the Folder state's `colour_by`, the tags, the brain's scores, or the quick head's predictions
once it is fitted), the rows selected on it and the image under the pointer. A drag of the box, a lasso and a click
on a point go to the Folder model (its filters and its selection: the table and the gallery follow them). Nothing of
earlier results stays when they go: the points of a folder or model shown before leave with its results, before the
new map is ready."""

from __future__ import annotations

from ..evented import Event, EventedModel
from ..folder_scores import NAMES as SCORES
from . import PageEntry


class MapModel(EventedModel):
    changed = Event('"points" (new points, or none), "colours", "selection" (the rows selected on it) or "pointed"')
    show_requested = Event("the page asks to be in sight: the quick head's predictions are drawn on it")

    title = "Map"
    tooltip = "The folder's images on a map of their features"

    def __init__(self, folder) -> None:
        """`folder`: the Folder model, holding the App's tags and labels (`folder.tags`, `folder.labels`)."""
        self.folder = folder
        self.coords = None  # (N, 2) of the results shown, None until their map is ready
        self.method = ""  # how they were projected ("pca", "umap")
        self.head = None  # the quick head whose predictions colour the points, until another colouring is chosen
        self.pointed: int | None = None  # the row under the pointer
        folder.results_changed.connect(self.show)
        folder.map_ready.connect(self._on_map)
        folder.rows_changed.connect(self._on_rows)
        folder.scores_ready.connect(self._on_scores)
        folder.state.events.colour_by.connect(self._on_colour_by)
        folder.tags.changed.connect(self._on_tags)
        folder.labels.head_ready.connect(self._on_head)

    def show(self, _results) -> None:
        """New results or none: the earlier points, their colouring and the image pointed at go."""
        self.coords, self.method, self.head, self.pointed = None, "", None, None
        self.changed.emit("points")

    @property
    def results(self):
        return self.folder.results

    @property
    def tags(self) -> list:
        """Each row's tags (the App's records), for colouring by tag."""
        return self.folder.tags.tags

    def colour_key(self) -> str:
        return self.folder.colour_key()

    def selected(self):
        """The rows selected on the map (a box dragged, a lasso), or None."""
        return self.folder.selected_on_map()

    # -- what the user does on the map --------------------------------------------------------------------------
    def move_box(self, x: float, y: float, width: float, height: float) -> None:
        self.folder.move_box(x, y, width, height)

    def select_lasso(self, polygon) -> None:
        self.folder.select_lasso(polygon)

    def pick(self, row: int) -> None:
        """A point clicked: that image becomes the folder's current row (and so the app's current image)."""
        if self.folder.embedded is not None and row != self.folder.selected:
            self.folder.select(row)

    def point(self, row: int) -> None:
        """The pointer is over `row`'s point."""
        if self.results is not None and 0 <= row < len(self.results) and row != self.pointed:
            self.pointed = row
            self.changed.emit("pointed")

    # -- the Folder model's events ------------------------------------------------------------------------------
    def _on_map(self, coords, method: str) -> None:
        self.coords, self.method, self.head = coords, method, None
        self.changed.emit("points")

    def _on_rows(self, _rows) -> None:
        self.changed.emit("selection")

    def _recolour(self) -> None:
        self.head = None
        if self.coords is not None:
            self.changed.emit("colours")

    def _on_colour_by(self, _by) -> None:
        self._recolour()  # a colouring chosen: the model's again, not the quick head's

    def _on_scores(self, _scores) -> None:
        if self.colour_key() in SCORES:
            self._recolour()

    def _on_tags(self) -> None:
        if self.colour_key() == "tag":
            self._recolour()

    def _on_head(self, head) -> None:
        if self.coords is None:
            return
        self.head = head
        self.changed.emit("colours")
        self.show_requested.emit()


PAGE = PageEntry("map", "Explore", MapModel, rank=10)
