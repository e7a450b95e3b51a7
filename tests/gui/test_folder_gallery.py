"""The Folder tab's gallery, the map's lasso, tags and views (issue 50 items 2-4), driven by the mouse on one panel:
an outline drawn on the map filters the table and the gallery to the points inside it (matplotlib's Path on the
outline drawn), the legend counts them per colour, the Tag and Views menus tag it and save the filters, the gallery
shows the table's rows in the table's order, and one selection runs through the gallery, the table and the model."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
from matplotlib.path import Path
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog

from tests.gui.helpers import drag_on_map, settle
from vitstudio.core.models.demo import bundled_demo, render_digits


def test_a_lasso_filters_table_and_gallery_and_one_selection_runs_through_them(panel, qtbot, tmp_path, monkeypatch):
    """A left-button drag with Lasso on draws an outline (the box hidden) and the table shows exactly the points inside
    it (matplotlib's Path on the outline drawn); the legend gives per predicted class how many the outline holds of how
    many (counted in the test); Tag → "Tag the selection…" tags the map's selection, colouring the map by tag gives
    "keep (k of k)" and "untagged (0 of 40−k)" in the legend, the bound Tag list filters to it, Views → "Save the
    filters as a view…" and, after Reset filters, the view picked from the Views menu brings the tag filter and the rows
    back; the Gallery shows the table's rows in the table's order, its "confidence ↓" sorts the table (header arrow) and
    the grid together, a cell's caption is its prediction, confidence and tag and its thumbnail arrives; a click on a
    cell is the Folder model's selection and the table's current row, a table selection the grid's; Lasso off brings the
    box back as the selection and the outline goes. The tab opens on the Map page. [panel]
    """
    from vitstudio.gui.folder.folder_panel import FolderPanel

    folder = panel(FolderPanel, model=bundled_demo())
    folder.resize(1280, 720)
    folder.open_folder(str(render_digits(tmp_path / "digits", per_class=4)))
    settle(qtbot)
    results, coords = folder.results, folder.coords
    assert coords is not None and len(coords) == 40
    assert folder.side.currentWidget() is folder.side.page("map")  # the tab opens on the Map page
    folder.side.page("map").lasso_button.click()
    assert folder.view_state.lasso and not folder.side.page("map").map.box.isVisible()  # one tool at a time
    centre, spread = coords.mean(0), coords.std(0)
    circle = [centre + spread * (np.cos(a), np.sin(a)) for a in np.linspace(0, 2 * np.pi, 30)]
    drag_on_map(folder.side.page("map").map, circle)
    outline = np.asarray(folder.side.page("map").map.lasso._drawn)
    inside = np.flatnonzero(Path(outline).contains_points(coords.astype(np.float64)))
    assert 3 < len(inside) < 40 and folder.view_state.follow_map
    assert sorted(folder.visible_rows()) == inside.tolist()
    # the legend: per predicted class, how many the outline holds of how many there are
    held, total = Counter(results.predicted_labels()[inside].tolist()), Counter(results.predicted_labels().tolist())
    legend = dict((name, (int(k), int(n))) for name, k, n in
                  re.findall(r"&nbsp;(\S+) \((\d+) of (\d+)\)", folder.side.page("map").map.legend.text()))
    assert legend == {name: (held[name], total[name]) for name in total}

    # tagged through the Tag menu (the map's selection: no row selected), filtered by the bound Tag list, saved as a
    # view through the Views menu and restored from it after a reset
    monkeypatch.setattr(QInputDialog, "getItem", lambda *a, **k: ("keep", True))
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("kept", True))
    folder.tag_menus.tag_selection()
    colour_by = folder.side.page("map").colour_by
    colour_by.setCurrentIndex(colour_by.findText("tag"))  # a group per tag, then the untagged ones
    legend = re.findall(r"&nbsp;(\S+) \((\d+) of (\d+)\)", folder.side.page("map").map.legend.text())
    k = len(inside)
    assert legend == [("keep", str(k), str(k)), ("untagged", "0", str(40 - k))]
    folder.toolbar.follow_map.click()  # the map no longer filters: the tag does
    folder.toolbar.tag_filter.setCurrentIndex(folder.toolbar.tag_filter.findText("keep"))
    assert folder.view_state.tag == "keep" and sorted(folder.visible_rows()) == inside.tolist()
    said = []
    folder.state.message.connect(lambda _level, text: said.append(text))
    folder.tag_menus.save_view()
    assert said[-1] == "View 'kept' saved: 1 rule."  # it said "1 rules"
    folder.toolbar.reset_button.click()
    assert len(folder.visible_rows()) == 40 and folder.toolbar.tag_filter.currentText() == "any tags"
    folder.tag_menus.views_menu.aboutToShow.emit()
    next(a for a in folder.tag_menus.views_menu.actions() if a.text() == "kept").trigger()
    assert folder.toolbar.tag_filter.currentText() == "keep" and sorted(folder.visible_rows()) == inside.tolist()

    # the gallery: the table's rows, in its order; the sort chosen in the gallery is the table's
    folder.browse.gallery_button.click()
    assert folder.view_state.gallery and folder.browse.stack.currentWidget() is folder.gallery
    gallery = folder.gallery.model()
    assert [gallery.source_row(i) for i in range(gallery.rowCount())] == folder.visible_rows()
    folder.browse.sort.setCurrentIndex(folder.browse.sort.findText("confidence ↓"))
    folder.browse.sort.activated.emit(folder.browse.sort.currentIndex())
    header = folder.table.horizontalHeader()
    assert (header.sortIndicatorSection(), header.sortIndicatorOrder()) == (3, Qt.DescendingOrder)
    order = [gallery.source_row(i) for i in range(gallery.rowCount())]
    assert order == folder.visible_rows() and np.all(np.diff(results.confidence[order]) <= 0)
    first = gallery.index(0, 0)
    assert gallery.data(first) == f"{results.predicted_label(order[0])} {results.confidence[order[0]]:.0%} #keep"
    qtbot.waitUntil(lambda: gallery.data(first, Qt.DecorationRole) is not None, timeout=20000)  # decoded for it

    # one selection: a click in the grid is the Folder model's row and the table's current row
    rect = folder.gallery.visualRect(gallery.index(2, 0))
    qtbot.mouseClick(folder.gallery.viewport(), Qt.LeftButton, pos=rect.center())
    assert folder.folder_model.selected == order[2]
    assert folder.table_model.source_row(folder.table.currentIndex().row()) == order[2]
    folder.select_row(order[1])  # and the table's choice is the grid's
    assert folder.folder_model.selected == order[1] and folder.gallery.currentIndex().row() == 1

    folder.toolbar.reset_button.click()
    folder.toolbar.follow_map.click()
    folder.side.page("map").lasso_button.click()  # back to the box: it selects again, the outline goes
    assert folder.side.page("map").map.box.isVisible()
    assert sorted(folder.visible_rows()) == folder.folder_model.rows_in_box().tolist()
    assert not len(folder.side.page("map").map.lasso._drawn)
