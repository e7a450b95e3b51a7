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
