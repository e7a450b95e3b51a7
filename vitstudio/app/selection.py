"""The one selection, Qt-free: the current image as one identity — its file — whichever view picked it (the image
strip, the Folder table, the gallery, a point on the map). Every tab that shows "the image" follows
`AppState.selected` (the strip's entry, decoded once); a folder row picked becomes that entry (read off the GUI
thread, added to the strip, selected), and an image picked in the strip that belongs to the open folder becomes the
folder's row, so the table, gallery and map follow it too. A late read is dropped when another image was picked
meanwhile (the read is keyed by the path asked for: latest wins). The rows selected — the folder's multi-selection,
made in the table or the gallery, or by a script — are the App's too (`rows`, with where they were chosen): a tag, a
label, a "selected only" sort or export acts on them, and other results leave none."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .evented import ViewState
from .jobs import KeyedJobs, Runner

if TYPE_CHECKING:
    from .app_state import AppState, ImageEntry
    from .folder_model import FolderModel

SOURCES = ("", "strip", "folder")  # where the current image was picked ("": nowhere yet)
ROW_SOURCES = ("", "table", "gallery")  # where the folder's rows were selected ("": none are)


class SelectionState(ViewState):
    CONTEXT = ()  # which image is current depends on no model
    path: str | None = None  # the current image's file (None: none, or an image with no file, e.g. a paste)
    source: str = ""  # one of SOURCES
    rows: tuple = ()  # the open folder's rows selected (a multi-selection), in results order
    rows_source: str = ""  # one of ROW_SOURCES


def read_entry_job(cancel, path: str):
    """The file as the strip holds it: decoded with its preview, or why it could not be read."""
    from vitstudio.core.data.images import ImageReadError, read_image

    from .app_state import make_entry

    try:
        return make_entry(path, read_image(path))
    except ImageReadError as exc:
        return make_entry(path, error=exc.reason)


def same_file(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


class Selection:
    def __init__(self, app: AppState, folder: FolderModel, runner: Runner) -> None:
        self.app, self.folder = app, folder
        self.state = SelectionState()
        self.jobs = KeyedJobs(self.state, {"read": ("path",)}, runner, without_context=("read",))
        self._picking = ""  # the source of a pick under way (a folder row being made the strip's entry)
        self._rows: tuple[object, dict[str, int]] = (None, {})  # (results, file -> row) of the folder's results
        app.image_selected.connect(self._on_entry)
        folder.row_selected.connect(self._on_row)
        folder.results_changed.connect(self._forget_rows)

    @property
    def current(self) -> ImageEntry | None:
        """The current image: the entry every tab shows."""
        return self.app.selected

    @property
    def rows(self) -> list[int]:
        """The open folder's rows selected (what a tag, a label or a "selected only" sort acts on), in order."""
        return list(self.state.rows)

    def select_rows(self, rows, source: str = "table") -> None:
        """The rows selected in `source` (the table, the gallery): every view of the folder's rows follows them."""
        rows = tuple(sorted({int(r) for r in rows}))
        self.state.update(rows=rows, rows_source=source if rows else "")

    def _forget_rows(self, _results) -> None:
        """Other results (another folder or model) or none: their rows are other images."""
        self.state.update(rows=(), rows_source="")

    def show_path(self, path: str, source: str = "strip") -> None:
        """Make the image at `path` the current one: the strip's entry for it, read first when the strip has none."""
        self.state.update(path=path, source=source)
        entry = next((e for e in self.app.images if e.path == path), None)
        if entry is not None:
            self._select(entry, source)
            return
        self.jobs.start("read", "Reading image", read_entry_job, path, on_result=self._on_read)

    def _on_read(self, entry: ImageEntry) -> None:
        self.jobs.clear("read")  # the entry lives in the strip; the slot must not keep a second reference
        self._picking = self.state.source  # the strip selects its first image itself: picked here all the same
        try:
            if all(e.path != entry.path for e in self.app.images):
                self.app.add_images([entry])
            if entry.error is None:
                self.app.select(entry)
        finally:
            self._picking = ""

    def _select(self, entry: ImageEntry, source: str) -> None:
        self._picking = source
        try:
            self.app.select(entry)
        finally:
            self._picking = ""

    def _on_entry(self, entry: ImageEntry | None) -> None:
        """The strip's image changed (or a pick made it so): the current file, and the folder's row for it."""
        path = entry.path if entry is not None else None
        self.state.update(path=path, source=self._picking or ("strip" if entry is not None else ""))
        row = self.row_of(path) if path else None
        if row is not None and row != self.folder.selected:
            self.folder.select(row)

    def _on_row(self, row: int | None) -> None:
        """A folder row picked (the table, the gallery, the map): its file becomes the current image."""
        results = self.folder.results
        if row is None or results is None:
            return
        path = results.paths[row]
        if path != self.state.path:
            self.show_path(path, "folder")

    def row_of(self, path: str) -> int | None:
        """The open folder's row of the file at `path`, or None."""
        results = self.folder.results
        if results is None:
            return None
        if self._rows[0] is not results:  # a lookup table per results (the same rows: built once)
            self._rows = (results, {same_file(p): row for row, p in enumerate(results.paths)})
        return self._rows[1].get(same_file(path))
