"""The Folder tab's multi-selection bound both ways to the App's (`app.selection.rows`, vitstudio/app/selection.py):
rows selected in the table or the gallery become the App's selected rows, with where they were chosen; the App's rows
(chosen in either, or by a script) are selected in both. A reset of the table (sorted, filtered, other results) selects
again those of the App's rows it still shows, and the App's selection drops the ones it hides: a tag, a label or a
"selected only" sort acts on rows the user can see selected."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QItemSelection, QItemSelectionModel, QObject


def selected_rows(view, table_model) -> list[int]:
    """The source rows selected in `view` (the table, or the gallery of the same rows in the same order)."""
    return sorted({table_model.source_row(i.row()) for i in view.selectionModel().selectedRows()})


def runs(view_rows: np.ndarray) -> list[tuple[int, int]]:
    """Sorted view rows as (first, last) runs of consecutive rows: one selection range each."""
    if not len(view_rows):
        return []
    breaks = np.flatnonzero(np.diff(view_rows) != 1)
    starts, ends = np.r_[0, breaks + 1], np.r_[breaks, len(view_rows) - 1]
    return [(int(view_rows[s]), int(view_rows[e])) for s, e in zip(starts, ends)]


class RowSelectionBinding(QObject):
    def __init__(self, selection, table, table_model, gallery, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.selection, self.table, self.table_model, self.gallery = selection, table, table_model, gallery
        self._showing = False  # the views are being set from the App: their changes are not the user's
        table.selectionModel().selectionChanged.connect(self._from_table)
        gallery.selectionModel().selectionChanged.connect(self._from_gallery)
        selection.state.events.rows.connect(self.show)
        table_model.modelReset.connect(self._after_reset)  # (after the gallery's own reset: it was built first)

    def _from_table(self, *_changed) -> None:
        self._take(self.table, "table")

    def _from_gallery(self, *_changed) -> None:
        self._take(self.gallery, "gallery")

    def _take(self, view, source: str) -> None:
        rows = selected_rows(view, self.table_model)
        if not self._showing and rows != self.selection.rows:
            self.selection.select_rows(rows, source)

    def show(self, rows) -> None:
        """The App's selected rows, selected in the table and the gallery (those the filters leave)."""
        view_rows = np.flatnonzero(np.isin(self.table_model.rows, np.asarray(rows, np.int64)))
        self._showing = True
        try:
            for view, model, columns in ((self.table, self.table_model, self.table_model.columnCount()),
                                         (self.gallery, self.gallery.model(), 1)):
                if selected_rows(view, self.table_model) == sorted(self.table_model.source_row(v) for v in view_rows):
                    continue
                chosen = QItemSelection()
                for first, last in runs(view_rows):
                    chosen.select(model.index(first, 0), model.index(last, columns - 1))
                view.selectionModel().select(chosen, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)
        finally:
            self._showing = False

    def _after_reset(self) -> None:
        rows = self.selection.rows
        kept = np.asarray(rows, np.int64)[np.isin(rows, self.table_model.rows)].tolist() if rows else []
        if kept != rows:
            self.selection.select_rows(kept, self.selection.state.rows_source)  # (shows them)
        else:
            self.show(kept)
