"""The Folder tab driven as a user would: open a labelled folder with the bundled digits model, the table shows the
core's results (sortable, filterable, exported to CSV), the map box filters the table, a selected row lists its
nearest neighbours (double-click explains one in the attention tab), sorting into folders copies every file once,
and the label review puts flipped labels first; the GUI thread never waits on the work."""

from __future__ import annotations

import csv
import os
import shutil

import numpy as np
from PySide6.QtCore import Qt

from tests.core.synthetic_data import tree_state
from tests.gui.helpers import folder_panel, open_in_folder_tab
from tests.gui.helpers import settle as _settle
from vitstudio.core.data.images import file_digest
from vitstudio.core.folder.neighbours import nearest
from vitstudio.core.models.demo import bundled_demo, render_digits


def _digits(tmp_path, per_class=12):
    return render_digits(tmp_path / "digits", per_class)


def test_folder_tab_end_to_end(window, qtbot, tmp_path, monkeypatch):
    """120 rows, dataset only read; filters, sort, thumbnails, CSV of the rows shown (Export 120 images… → CSV of every
    column, which replaced the Export CSV… button); map box filters; similar = core `nearest`; sort copies once
    byte-for-byte; review puts the flipped image top-3; exclude → retrain; duplicate groups filter. [window] "Table
    follows map box" checked before any drag (as a restart leaves it) filters by the box as drawn (the walk saw 150 of
    150). The table opens sorted by file name, ascending, with the arrow on the file column (it sat on the thumbnails'
    column over rows in descending order: the walk).
    """
    data = _digits(tmp_path)
    flipped = data / "5" / "flipped-0003.png"
    os.replace(data / "3" / "0003.png", flipped)  # a 3 in the folder of fives
    before = tree_state(data)
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))
    window.show_tab("folder")
    panel = window.folder
    panel.open_folder(str(data))
    _settle(qtbot)
    results = panel.results
    assert results is not None and len(results) == 120 and panel.table_model.rowCount() == 120
    assert set(results.given) == {str(d) for d in range(10)}
    assert (results.correct() == 1).mean() > 0.8  # the demo model reads digits
    assert tree_state(data) == before  # the dataset is only read
    header = panel.table.horizontalHeader()  # sorted by file name, ascending, and the arrow says so (it sat on the
    assert (header.sortIndicatorSection(), header.sortIndicatorOrder()) == (1, Qt.AscendingOrder)  # thumbnails:
    shown = [results.paths[panel.table_model.source_row(i)] for i in range(panel.table_model.rowCount())]  # the walk)
    assert shown == sorted(shown, key=lambda p: os.path.basename(p)) or shown == sorted(shown)

    # filters and sorting: mistakes only, then one predicted class, then a confidence floor
    panel.toolbar.correctness.setCurrentIndex(2)
    assert sorted(panel.visible_rows()) == sorted(np.nonzero(results.correct() == 0)[0].tolist())
    assert any(results.paths[r] == str(flipped) for r in panel.visible_rows())
    panel.toolbar.correctness.setCurrentIndex(0)
    panel.toolbar.predicted.setCurrentIndex(panel.toolbar.predicted.findData("7"))
    assert all(results.predicted_label(r) == "7" for r in panel.visible_rows()) and panel.visible_rows()
    panel.toolbar.predicted.setCurrentIndex(0)
    panel.toolbar.min_conf.setValue(0.9)
    assert all(results.confidence[r] >= 0.9 for r in panel.visible_rows()) and panel.visible_rows()
    panel.toolbar.min_conf.setValue(0.0)
    panel.table.sortByColumn(3, Qt.AscendingOrder)  # confidence, lowest first
    first = panel.table_model.source_row(0)
    assert results.confidence[first] == results.confidence.min()

    # thumbnails arrive for the rows on screen, from a worker
    qtbot.waitUntil(lambda: panel.table_model.data(panel.table_model.index(first, 0), Qt.DecorationRole) is not None,
                    timeout=20000)

    # CSV of the rows shown: Export N images… → CSV of every column
    monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getSaveFileName",
                        lambda *a, **k: (str(tmp_path / "rows.csv"), ""))
    assert panel.export_menu.button.text() == "Export 120 images…"
    panel.export_menu.actions["table"].trigger()
    _settle(qtbot)
    with open(tmp_path / "rows.csv", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 120 and {r["path"] for r in rows} == set(results.paths)

    # the map: PCA (umap-learn is optional), and its box filters the table
    qtbot.waitUntil(lambda: panel.coords is not None, timeout=20000)
    assert panel.coords.shape == (120, 2)
    box = panel.side.page("map").map.box
    box.setPos(box.pos(), finish=True)  # as the end of a drag: the box says where it is
    inside = panel.folder_model.rows_in_box()
    assert panel.toolbar.follow_map.isChecked() and sorted(panel.visible_rows()) == sorted(inside.tolist())
    panel.toolbar.follow_map.setChecked(False)
    assert len(panel.visible_rows()) == 120
    # checked before any drag (as a restart leaves it): the box as drawn filters at once (the walk saw 150 of 150)
    panel.folder_model.map_rows = None
    panel.toolbar.follow_map.setChecked(True)
    assert sorted(panel.visible_rows()) == sorted(inside.tolist()) and len(inside) < 120
    panel.toolbar.follow_map.setChecked(False)

    # similar images of the selected row, as the core finds them
    panel.select_row(5)
    _settle(qtbot)
    similar = panel.side.page("similar").list
    qtbot.waitUntil(lambda: similar.count() == 12, timeout=20000)
    expected = nearest(panel.embedded.features, [5], k=12, rows=panel.embedded.rows)
    shown = [similar.item(i).data(Qt.UserRole) for i in range(12)]
    assert shown == [results.paths[i] for i in expected.indices[0]]
    with qtbot.waitSignal(window.state.image_selected, timeout=20000):
        similar.itemDoubleClicked.emit(similar.item(0))
    assert window.state.selected.path == shown[0] and "Attention" in window.tabs.tabText(window.tabs.currentIndex())

    # sort into folders: every file copied once, byte for byte; the originals stay
    window.show_tab("folder")
    plan = panel.sort_plan(str(tmp_path / "sorted"), 0.0, False, selected_only=False)
    panel.files.run_sort(plan)
    _settle(qtbot)
    copied = sorted(file_digest(p) for p in (tmp_path / "sorted").rglob("*.png"))
    assert copied == sorted(file_digest(p) for p in data.rglob("*.png"))
    assert tree_state(data) == before

    # label review: the flipped image comes first (or nearly), with a suggestion
    panel.start_review()
    _settle(qtbot)
    review = panel.side.page("review")
    qtbot.waitUntil(lambda: review.list.count() > 0, timeout=30000)
    top = [review.list.item(i).data(Qt.UserRole)[0] for i in range(min(3, review.list.count()))]
    assert str(flipped) in top and panel.side.currentWidget() is review  # a review arrived: its page in sight
    assert review.relabel_button.isEnabled()
    # exclude the flipped image, then retrain: the Training panel gets the folder minus it (the folder untouched)
    review.list.setCurrentRow(top.index(str(flipped)))
    review.exclude_button.click()
    assert review.model.excluded == {str(flipped)} and "1 excluded" in review.retrain_button.text()
    review.retrain_button.click()
    assert "Training" in window.tabs.tabText(window.tabs.currentIndex())
    assert window.training.dataset_actions.exclude == [str(flipped)]
    info = window.training.dataset.dataset_info
    qtbot.waitUntil(lambda: "excluded by the label review" in info.text(), timeout=20000)
    assert tree_state(data) == before
    window.show_tab("folder")
    # duplicate groups (the scans of one digit at 32 px are close to a perceptual hash): picking one filters the table
    assert panel.side.page("duplicates").count() == len(panel.report.groups) + 1
    if panel.report.groups:
        panel.side.page("duplicates").setCurrentRow(1)
        shown = {results.paths[r] for r in panel.visible_rows()}
        assert shown == set(panel.report.groups[0].paths)
        panel.side.page("duplicates").setCurrentRow(0)
        assert len(panel.visible_rows()) == 120


def test_a_new_model_clears_the_folder_results(panel, qtbot, tmp_path):
    """Loading another model clears the folder results and table and asks to open again. [panel] The info line's "open …
    again" link opens the same folder through the new model in one click.
    """
    from vitstudio.core.models.loading import load_model

    data = _digits(tmp_path, per_class=3)
    folder = folder_panel(panel, qtbot, data)
    assert folder.results is not None
    folder.state.set_model(load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=10"))
    assert folder.results is None and folder.table_model.rowCount() == 0
    assert "open" in folder.info.text().lower() and 'href="reopen"' in folder.info.text()
    folder.info.linkActivated.emit("reopen")  # one click: the same folder through the new model
    _settle(qtbot)
    assert folder.results is not None and len(folder.results) == 30
    shutil.rmtree(data)


def test_open_recent_opens_a_folder_in_the_folder_tab_and_files_in_the_strip(window, monkeypatch, tmp_path):
    """File → Open recent: a folder entry opens as File → Open folder did (strip and Folder tab), a file entry in the
    strip. A folder opened with the Folder tab's own button is remembered first. [window]
    """
    data = _digits(tmp_path, per_class=1)
    image = str(next((data / "3").iterdir()))
    window.settings.setValue("recent", [str(data), image])
    window.recent_menu.refresh()
    folders, files = [], []
    monkeypatch.setattr(window, "open_folder", folders.append)
    monkeypatch.setattr(window, "add_paths", files.append)
    for action in window.recent_menu.actions():
        action.trigger()
    assert folders == [str(data)] and files == [[image]]
    other = str(tmp_path / "other")
    monkeypatch.setattr("vitstudio.gui.file_dialogs.choose_folder", lambda *_args, **_kw: other)
    window.folder._choose_folder()  # the Folder tab's own Open folder… is remembered too, first
    assert window.recent_menu.actions()[0].toolTip() == other


def test_a_model_switch_while_a_folder_embeds_embeds_it_for_the_new_model(panel, qtbot, tmp_path):
    """Issue 29, item 12: the switch dropped the folder's job ("open it again"); it goes on through the new model.

    A model loaded while 200 digits embed through the demo: the folder goes on through the new model (its classes, every
    image) instead of being dropped (issue 29, item 12). [panel]
    """
    from vitstudio.core.models.loading import load_model

    data = _digits(tmp_path, per_class=20)
    folder = folder_panel(panel, qtbot)
    other = load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=4")
    folder.open_folder(str(data))
    qtbot.waitUntil(folder.toolbar.cancel_button.isEnabled, timeout=10000)  # embedding through the demo
    folder.state.set_model(other)
    _settle(qtbot)
    qtbot.waitUntil(lambda: folder.results is not None, timeout=60000)
    assert folder.results.labels == tuple(other.labels) and len(folder.results) == 200


def test_a_registered_page_is_a_tab_fed_the_folders_results_and_a_row_double_click_explains(window, qtbot, tmp_path):
    """The Counts page (gui/folder/pages/, no line of the panel names it) is a side tab whose table shows its
    model's counts of the folder opened and empties with a model switch; double-clicking a table row explains that
    image in the Attention tab (the review's line says so; the table did nothing).

    [window]
    """
    from vitstudio.gui.folder.pages.class_counts_page import ClassCountsPage

    open_in_folder_tab(window, qtbot, _digits(tmp_path, per_class=3))
    panel = window.folder
    page = next(p for p in panel.side.pages if isinstance(p, ClassCountsPage))
    assert panel.side.tabText(panel.side.indexOf(page)) == "Counts"
    given = {page.table.item(r, 0).text(): page.table.item(r, 2).data(Qt.DisplayRole)
             for r in range(page.table.rowCount())}
    assert given == {str(d): 3 for d in range(10)} and page.summary.text().startswith("All 30 images of the folder: ")
    predicted = [page.table.item(r, 1).data(Qt.DisplayRole) for r in range(page.table.rowCount())]
    assert predicted == sorted(predicted, reverse=True)  # most predicted first, as the header's arrow says
    row = panel.table_model.index(4, 1)
    path = panel.results.paths[panel.table_model.source_row(4)]
    with qtbot.waitSignal(window.state.image_selected, timeout=20000):
        panel.table.doubleClicked.emit(row)
    assert window.state.selected.path == path and "Attention" in window.tabs.tabText(window.tabs.currentIndex())
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=10")
    _settle(qtbot)
    assert page.table.rowCount() == 0 and page.summary.text().startswith("Open a folder")
