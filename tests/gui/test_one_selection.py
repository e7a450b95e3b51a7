"""One selection in the window: an image picked in the Folder table, the gallery, the map or the image strip is the
image of Predictions, Attention, Embeddings, Concepts → On the image, the Paint page and Match (each pair)."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel

from tests.gui.helpers import open_in_folder_tab, settle
from vitstudio.core.models.demo import render_digits


def _shown(window) -> dict:
    """The file each view shows as "the image"."""
    entry = window.state.selected
    explorers = {name: entry.path if getattr(window, name).view_state.image == entry.uid else None
                 for name in ("attention", "embeddings")}
    return {"predictions": entry.path if window.predictions.title.text().startswith(entry.path) else None,
            **explorers, "concepts": window.app.pages["concepts"].image_state.path,
            "paint": window.app.pages["paint"].image, "match": window.compare.match.model.path_a}


def test_an_image_picked_in_the_table_gallery_map_or_strip_is_every_tabs_image(window, qtbot, tmp_path):
    """Each way of picking an image, in turn, makes every view that shows one image show that file; the strip's
    image picked selects its row in the table and the gallery."""
    folder = render_digits(tmp_path / "digits", 2)
    open_in_folder_tab(window, qtbot, folder)
    panel = window.folder
    paths = panel.results.paths

    def check(row: int) -> None:
        qtbot.waitUntil(lambda: window.state.selected is not None and window.state.selected.path == paths[row],
                        timeout=20000)
        settle(qtbot)
        assert set(_shown(window).values()) == {paths[row]}, _shown(window)

    panel.select_row(3)  # the table
    check(3)
    panel.gallery.selectionModel().setCurrentIndex(  # the gallery
        panel.gallery.gallery_model.index(panel.table_model.view_row(7), 0), QItemSelectionModel.ClearAndSelect)
    check(7)
    panel.side.page("map").map.picked.emit(11)  # a point clicked on the map
    check(11)
    first = next(i for i, e in enumerate(window.state.images) if e.path == paths[3])
    window.strip.setCurrentRow(first)  # the strip: its image, and the folder's row for it
    check(3)
    current = panel.table.currentIndex()
    assert panel.table_model.source_row(current.row()) == 3 == panel.folder_model.selected
    assert panel.gallery.gallery_model.source_row(panel.gallery.currentIndex().row()) == 3


def test_the_rows_selected_in_the_table_or_the_gallery_are_the_apps_both_ways(panel, qtbot, tmp_path, monkeypatch):
    """The multi-selection is the App's (`app.selection.rows`), bound both ways: rows selected in the table (a click
    and a Ctrl+click keep both) or the gallery are the App's rows, with where they were chosen, and selected in the
    other view; rows a script selects are selected in both; sorting the table keeps them, a filter that hides one
    drops it; the Tag menu and a "selected only" sort act on the App's rows. [panel]"""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QInputDialog

    from tests.gui.helpers import folder_panel
    from vitstudio.gui.folder.folder_row_selection import selected_rows

    folder = folder_panel(panel, qtbot, render_digits(tmp_path / "digits", 2))
    selection, table, model, gallery = folder.app.selection, folder.table, folder.table_model, folder.gallery

    def shown_in_both() -> tuple:
        return selected_rows(table, model), selected_rows(gallery, model)

    def click(view_row: int, modifier=Qt.NoModifier) -> None:
        rect = table.visualRect(model.index(view_row, 1))
        qtbot.mouseClick(table.viewport(), Qt.LeftButton, modifier, rect.center())

    table.scrollToTop()
    click(0)
    click(2, Qt.ControlModifier)  # the current row moves; the selection keeps both
    chosen = sorted(model.source_row(v) for v in (0, 2))
    assert selection.rows == chosen and selection.state.rows_source == "table" and shown_in_both() == (chosen, chosen)
    gallery.selectionModel().select(folder.gallery.gallery_model.index(5, 0), QItemSelectionModel.ClearAndSelect)
    assert selection.rows == [model.source_row(5)] and selection.state.rows_source == "gallery"
    assert shown_in_both() == ([model.source_row(5)], [model.source_row(5)])

    results = folder.results
    a = 0
    b = next(r for r in range(len(results)) if results.predicted_label(r) != results.predicted_label(a))
    selection.select_rows([a, b], "table")  # as a script selects them
    assert shown_in_both() == ([a, b], [a, b])
    model.sort(2, Qt.DescendingOrder)  # the rows in another order: the same ones selected
    assert shown_in_both() == ([a, b], [a, b]) and selection.rows == [a, b]

    monkeypatch.setattr(QInputDialog, "getItem", lambda *a, **k: ("picked", True))
    folder.tag_menus.tag_selection()
    assert [i for i, tags in enumerate(folder.folder_tags.tags) if "picked" in tags] == [a, b]
    plan = folder.sort_plan(str(tmp_path / "sorted"), 0.0, False, selected_only=True)
    assert sorted(p.source for p in plan.placements) == sorted(results.paths[r] for r in (a, b))

    folder.view_state.predicted = results.predicted_label(a)  # b hidden by the filter: no longer selected
    settle(qtbot)
    assert selection.rows == [a] and shown_in_both() == ([a], [a])
