"""The Folder tab's layout and state lines, driven through the Folder panel (the whole window where a test is about
it: the 1280×720 toolbar, a refusal in the status bar) with the bundled digits model: "N of M
shown", filters that belong to a folder (reset when another opens), an empty folder that says what to do and
disables the buttons, a failed review that replaces "Reviewing labels…", grids of equal cells (review, similar
images with the query), map tooltips in words, a colour bar for confidence, a legend beside the plot, the *given*
cell red where the folder disagrees, and head-grid cells of one size."""

from __future__ import annotations

import os
import shutil
from itertools import combinations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QDockWidget, QScrollArea, QStyleOptionViewItem, QTableView

from tests.gui.helpers import settle as _settle
from vitstudio.core.folder.label_review import LabelIssue
from vitstudio.core.folder.results import FolderResults
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.gui import workers

LONG_NAME = "a-very-long-file-name-that-would-widen-the-side-pane-if-the-hover-line-could-grow-" * 2 + "7.png"




@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """A folder of 6 digits per class (one file with a long name, one 3 filed under 5), rendered once: the tests
    only read it (another folder they need is a copy or a folder of their own)."""
    data = render_digits(tmp_path_factory.mktemp("layout") / "digits", 6)
    os.replace(sorted((data / "7").iterdir())[0], data / "7" / LONG_NAME)
    os.replace(sorted((data / "3").iterdir())[0], data / "5" / "flipped-3.png")
    return data


def _open(folder, qtbot, data) -> None:
    folder.open_folder(str(data))
    _settle(qtbot)
    qtbot.waitUntil(lambda: folder.coords is not None, timeout=20000)


@pytest.fixture
def opened(panel, qtbot, digits):
    """The Folder panel alone (its own AppState) with the demo model and the digits folder open."""
    from vitstudio.gui.folder.folder_panel import FolderPanel

    folder = panel(FolderPanel, model=bundled_demo())
    _open(folder, qtbot, digits)
    return folder, digits


def test_count_line_and_filters_reset_with_the_folder(opened, qtbot, tmp_path):
    """"N of M shown" follows filters; opening another folder resets filters and names it. [panel]"""
    panel, data = opened
    total = len(panel.results)
    assert total == 60
    assert panel.toolbar.shown.text().replace("<b>", "").replace("</b>", "") == "60 of 60 shown"
    assert "digits" in panel.toolbar.filters_for.text()
    panel.toolbar.correctness.setCurrentIndex(2)  # mistakes
    mistakes = int((panel.results.correct() == 0).sum())
    assert 0 < mistakes < total
    assert panel.toolbar.shown.text().replace("<b>", "").replace("</b>", "") == f"{mistakes} of 60 shown"
    panel.toolbar.min_conf.setValue(0.5)

    other = tmp_path / "other"
    shutil.copytree(data / "1", other / "1")
    shutil.copytree(data / "2", other / "2")
    panel.open_folder(str(other))
    _settle(qtbot)
    assert panel.toolbar.correctness.currentIndex() == 0 and panel.toolbar.min_conf.value() == 0.0
    assert panel.visible_rows() and len(panel.visible_rows()) == len(panel.results) == 12
    assert panel.toolbar.shown.text().replace("<b>", "").replace("</b>", "") == "12 of 12 shown"
    assert "other" in panel.toolbar.filters_for.text()


def test_empty_folder_says_what_to_do_and_disables_the_buttons(opened, qtbot, tmp_path):
    """An empty folder says "No images … .png" and disables sort/Export…/review/filters, not Open (the Export CSV…
    button folded into Export…'s CSV of every column). [panel]
    """
    panel, _data = opened
    bar = panel.toolbar
    assert bar.sort_button.isEnabled() and bar.export_button.isEnabled() and bar.review_button.isEnabled()
    empty = tmp_path / "empty"
    (empty / "nothing here").mkdir(parents=True)
    panel.open_folder(str(empty))
    _settle(qtbot)
    assert "No images" in panel.info.text() and ".png" in panel.info.text()
    for button in (bar.sort_button, bar.export_button, bar.review_button, bar.predicted, bar.correctness, bar.min_conf):
        assert not button.isEnabled()
    assert bar.open_button.isEnabled()


def test_failed_review_replaces_the_reviewing_line(opened, qtbot, tmp_path):
    """A review of a vanished folder replaces "Reviewing labels…" with "Failed: …". [panel]"""
    panel, data = opened
    moved = tmp_path / "moved"
    shutil.copytree(data, moved)
    panel.open_folder(str(moved))
    _settle(qtbot)
    shutil.rmtree(moved)  # the folder goes away (moved, unplugged) before the review reads it
    panel.start_review()
    assert panel.info.text().startswith("Reviewing labels")
    _settle(qtbot)
    assert "Reviewing" not in panel.info.text()
    assert panel.info.text().startswith("Failed: ")


def test_map_tooltips_colour_bar_legend_and_hover(opened, qtbot):
    """Map tooltip in words (given, predicted, confidence); prediction colouring shows a legend below the plot,
    confidence a 0-100 colour bar right of it; hovering a long name keeps the pane width. [panel]
    """
    panel, _data = opened
    results = panel.results
    row = results.paths.index(next(p for p in results.paths if p.endswith("flipped-3.png")))
    item = next(i for i in panel.side.page("map").map.items if row in i.data["data"].tolist())
    spot = item.data["data"].tolist().index(row)
    x, y = item.data["x"][spot], item.data["y"][spot]
    tip = item.opts["tip"](x=x, y=y, data=row)
    assert "flipped-3.png" in tip and "given: 5" in tip
    assert f"predicted: {results.predicted_label(row)} ({results.confidence[row]:.0%})" in tip
    assert "data=" not in tip

    # categories: a legend beside the plot (not over it) naming every predicted class; no colour bar
    panel.side.page("map").colour_by.setCurrentText("prediction")
    qtbot.wait(50)
    legend, plot = panel.side.page("map").map.legend, panel.side.page("map").map
    assert legend.isVisible() and not panel.side.page("map").map.colour_bar.isVisible()
    for label in {results.predicted_label(r) for r in range(len(results))}:
        assert f"&nbsp;{label} (" in legend.text()
    top_left = legend.mapTo(panel.side.page("map"), legend.rect().topLeft())
    assert top_left.y() >= plot.mapTo(panel.side.page("map"), plot.rect().bottomLeft()).y()
    # confidence: a colour bar of the same colours, right of the plot, instead of ten legend entries
    panel.side.page("map").colour_by.setCurrentText("confidence")
    qtbot.wait(50)
    bar = panel.side.page("map").map.colour_bar
    assert bar.isVisible() and bar.scene() is plot.scene() and legend.text() == ""
    assert bar.sceneBoundingRect().left() >= plot.getPlotItem().vb.sceneBoundingRect().right() - 1
    assert tuple(bar.levels()) == (0, 100)

    # hovering the long-named image names it and keeps the pane's width
    width = panel.side.minimumSizeHint().width()
    long_row = results.paths.index(next(p for p in results.paths if p.endswith(LONG_NAME)))
    panel.side.page("map").model.point(long_row)
    qtbot.wait(50)
    assert LONG_NAME in panel.side.page("map").hover.text()
    assert panel.side.minimumSizeHint().width() == width


def _disjoint_uniform(widget) -> list:
    rects = [widget.visualRect(widget.model().index(i, 0)) for i in range(widget.count())]
    assert all(r.isValid() for r in rects)
    for a, b in combinations(rects, 2):
        assert not a.intersects(b), (a, b)
    assert len({(r.width(), r.height()) for r in rects}) == 1  # one cell size: nothing grows over a neighbour
    return rects


def test_similar_images_grid_with_the_query(opened, qtbot):
    """Similar-images grid has 12 disjoint equal cells and a larger query thumbnail with its name. [panel]"""
    panel, _data = opened
    panel.select_row(3)
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.side.page("similar").list.count() == 12, timeout=20000)
    query = panel.results.paths[panel.table_model.source_row(panel.table.currentIndex().row())]
    assert os.path.basename(query) in panel.side.page("similar").query_text.text()
    qtbot.waitUntil(lambda: panel.side.page("similar").query_image.pixmap() is not None
                    and not panel.side.page("similar").query_image.pixmap().isNull(), timeout=20000)
    assert panel.side.page("similar").query_image.pixmap().width() > 96  # bigger than the grid's thumbnails
    assert panel.side.page("similar").list.iconSize().width() >= 96
    panel.side.setCurrentWidget(panel.side.page("similar"))
    _settle(qtbot)
    qtbot.wait(50)
    _disjoint_uniform(panel.side.page("similar").list)


def test_review_grid_cells_are_uniform_and_disjoint(qtbot, tmp_path):
    """Label-review cells are disjoint, one size, hold a 96-px thumbnail + two caption lines, icons arrive, and a click
    at a cell's centre hits it.
    """
    from PySide6.QtWidgets import QLabel, QTabWidget

    from vitstudio.app.app_state import AppState
    from vitstudio.app.folder_model import FolderModel
    from vitstudio.app.jobs import ScriptRunner
    from vitstudio.app.pages.label_review import LabelReviewModel
    from vitstudio.gui.folder.pages.label_review_page import LabelReviewPage

    side = QTabWidget()  # as in the Folder tab: the review is filled while the Map page is the one shown
    qtbot.addWidget(side)
    side.resize(460, 600)
    side.addTab(QLabel("map"), "Map")
    model = LabelReviewModel(FolderModel(AppState(), ScriptRunner()))
    tab = LabelReviewPage(model)
    side.addTab(tab, "Label review")
    side.show()
    data = render_digits(tmp_path / "digits", 2)
    paths = sorted(str(p) for p in data.rglob("*.png"))
    # captions of different lengths (flagged ones with ⚑); thumbnails decoded later by a worker
    issues = [LabelIssue(p, os.path.basename(os.path.dirname(p)), "8", k / 40, 0.1, k % 3 == 0)
              for k, p in enumerate(paths)]
    model.show_issues(issues)
    side.setCurrentWidget(tab)
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=20000)
    qtbot.wait(50)
    rects = _disjoint_uniform(tab.list)
    # each cell holds the whole thumbnail (96 px) and two lines of caption, before and after the icons arrive
    assert tab.list.iconSize().width() >= 96 and rects[0].height() >= 96 + 2 * tab.list.fontMetrics().height()
    assert all(not tab.list.item(i).icon().isNull() for i in range(tab.list.count()))
    # the item under the middle of a cell is that cell's item (a click selects what it lands on)
    for i, rect in enumerate(rects):
        assert tab.list.indexAt(rect.center()).row() == i


def test_given_cell_is_red_where_the_folder_disagrees(qtbot):
    """The *given* column paints red where folder ≠ prediction, default where it agrees or isn't a model class."""
    from vitstudio.gui.folder.folder_table import ResultsModel

    labels = tuple(str(d) for d in range(10))
    results = FolderResults(("d/3/a.png", "d/5/b.png", "d/ants/c.png"), ("3", "5", "ants"), np.array([3, 3, 3]),
                            np.array([0.9, 0.8, 0.7]), np.array([0.5, 0.4, 0.3]), labels)
    model = ResultsModel()
    model.set_results(results)
    table = QTableView()
    qtbot.addWidget(table)
    table.setModel(model)

    def text_colour(row: int) -> QColor:
        option = QStyleOptionViewItem()
        table.itemDelegate().initStyleOption(option, model.index(row, 4))  # what the view paints with
        return option.palette.color(QPalette.Text)

    default = table.palette().color(QPalette.Text)
    red = text_colour(1)  # folder 5, predicted 3
    assert red.red() > 150 and red.green() < 80 and red.blue() < 80
    assert text_colour(0) == default  # agrees
    assert text_colour(2) == default  # not one of the model's classes: nothing to compare


def test_head_grid_cells_are_one_size(qtbot):
    """12 head maps render in cells and images of one size, each > 20 px."""
    from vitstudio.gui.explore.head_grid import HeadGridWidget
    from vitstudio.gui.imaging import configure_pyqtgraph

    configure_pyqtgraph()
    grid = HeadGridWidget()
    qtbot.addWidget(grid)
    grid.resize(260, 400)
    grid.show()
    grid.set_maps(np.random.default_rng(0).random((12, 7, 7), dtype=np.float32), selected=1)
    qtbot.wait(100)
    sizes = {(round(v.sceneBoundingRect().width()), round(v.sceneBoundingRect().height())) for v in grid.views}
    images = {round(item.sceneBoundingRect().width()) for item in grid.items}
    assert len(sizes) == 1 and len(images) == 1, (sizes, images)
    assert all(view.sceneBoundingRect().width() > 20 for view in grid.views)


def test_head_grid_keeps_its_cells_across_head_counts(qtbot):
    """A model switch that changes the head count reuses the cells made before (making them took ~70 ms of the GUI
    thread on every switch), and the grid still splits its space evenly among the heads shown."""
    from vitstudio.gui.explore.head_grid import HeadGridWidget
    from vitstudio.gui.imaging import configure_pyqtgraph

    configure_pyqtgraph()
    grid = HeadGridWidget()
    qtbot.addWidget(grid)
    grid.resize(260, 400)
    grid.show()
    rng = np.random.default_rng(0)
    grid.set_maps(rng.random((12, 7, 7), dtype=np.float32), selected=1)
    first = list(grid.views)
    for heads in (2, 12, 3):
        grid.set_maps(rng.random((heads, 7, 7), dtype=np.float32), selected=heads - 1)
        qtbot.wait(50)
        assert grid.views == first[:heads] and len(grid.items) == heads  # the same cells, in head order
        assert all(view.scene() is grid.scene() for view in grid.views)
        assert all(view.scene() is None for view in first[heads:])  # the others are out of the grid
        sizes = {(round(v.sceneBoundingRect().width()), round(v.sceneBoundingRect().height())) for v in grid.views}
        assert len(sizes) == 1 and min(sizes.pop()) > 20, (heads, sizes)
        assert "head" in grid.labels[-1].text and "▶" in grid.labels[-1].text and "▶" not in grid.labels[0].text
    np.testing.assert_array_equal(grid.items[0].image.shape, (7, 7))


def test_overlay_has_a_colour_bar_of_its_levels(qtbot):
    """MapView colour bar shows the map's levels with matplotlib viridis ends, right of the view; no map hides it and
    widens the view.
    """
    from vitstudio.gui.common.map_view import MapView, lookup_table
    from vitstudio.gui.imaging import configure_pyqtgraph

    configure_pyqtgraph()
    view = MapView()
    qtbot.addWidget(view)
    view.resize(400, 400)
    view.show()
    view.set_image(np.zeros((64, 64, 3), np.uint8))
    values = np.arange(16, dtype=np.float32).reshape(4, 4) / 10
    view.set_map(values, cmap="viridis")
    qtbot.wait(50)
    bar = view.colour_bar
    assert bar.isVisible() and bar.scene() is view.scene()
    assert tuple(round(v, 6) for v in bar.levels()) == (0.0, 1.5)
    # the bar's colours are the overlay's: viridis from matplotlib, its ends as the reference
    ends = bar.colorMap().getLookupTable(nPts=2, alpha=False)
    assert np.abs(ends.astype(int) - lookup_table("viridis")[[0, -1]].astype(int)).max() <= 1
    assert bar.sceneBoundingRect().left() >= view.view.sceneBoundingRect().right() - 1
    beside_the_bar = view.view.sceneBoundingRect().width()
    view.set_map(None)
    qtbot.wait(50)
    assert not bar.isVisible() and view.view.sceneBoundingRect().width() > beside_the_bar + 20  # the whole width


def test_switching_the_colour_bar_keeps_no_references(qtbot):
    """Found by the soak: taking the bar out of the layout and back reconnected pyqtgraph's view signals to its
    button each time, and PySide6 kept a weak reference per connection, for as long as the window lived."""
    import weakref

    from vitstudio.gui.common.map_view import MapView

    view = MapView()
    qtbot.addWidget(view)
    view.show()
    view.set_image(np.zeros((32, 32, 3), np.uint8))
    button = view.colour_bar.autoBtn
    before = weakref.getweakrefcount(button)
    for _ in range(50):  # a scalar map (bar shown), then an RGB map and none (bar hidden)
        view.set_map(np.random.default_rng(0).random((4, 4)))
        view.set_map(np.zeros((4, 4, 3)))
        view.set_map(None)
    qtbot.wait(10)
    assert weakref.getweakrefcount(button) == before


def test_the_folder_maps_colour_bar_switches_without_keeping_references(qtbot):
    """The same for the Folder tab's map (confidence: a colour bar; categories: none), and the bar, shown again,
    still has the room its label needs."""
    import weakref

    from vitstudio.gui.folder.folder_map import FolderMapWidget

    plot = FolderMapWidget()
    qtbot.addWidget(plot)
    plot.resize(500, 400)
    plot.show()
    points = np.random.default_rng(0).random((20, 2))
    plot.set_points(points, [("a", (255, 0, 0), np.arange(20))], "pca")
    button, view = plot.colour_bar.autoBtn, plot.getPlotItem().vb
    before = weakref.getweakrefcount(button)
    for _ in range(50):
        plot.set_groups([("0-10 %", (255, 0, 0), np.arange(20))], scale=True)
        plot.set_groups([("a", (255, 0, 0), np.arange(20))])
    qtbot.wait(50)
    assert weakref.getweakrefcount(button) == before
    alone = view.sceneBoundingRect().width()
    plot.set_groups([("0-10 %", (255, 0, 0), np.arange(20))], scale=True)
    qtbot.wait(50)
    bar = plot.colour_bar
    assert bar.isVisible() and view.sceneBoundingRect().width() < alone
    width = bar.geometry().width()
    bar.getAxis("left").showLabel()  # measures the axis again with its label: the room was already there
    qtbot.wait(50)
    assert bar.geometry().width() == pytest.approx(width)


def test_folder_toolbar_fits_a_laptop_screen(window, qtbot):
    """At 1280×720 with the model card open the Folder tab is about 800 px wide: its two control rows must not
    make it wider, and every control stays reachable: a row that does not fit wraps (the QToolBar's » button showed
    nothing outside a QMainWindow, so Reset filters and the near-duplicate cosine were out of reach: issue 29,
    item 5); the count line stays in sight.

    Toolbar ≤ 400 px and panel ≤ 800 px wide; at 1280×720 the count line is visible and the page fits without scrolling;
    with the model card docked every control of both rows (Export… too) is visible inside the panel (rows wrap: a
    QToolBar's » shows no widgets outside a QMainWindow; issue 29, item 5) and a wider window unwraps them. [window]
    Every side tab is in sight at that width (Similar and Review are short titles with the full name as tooltip, and the
    side is never narrower than its tabs; Layers and Concepts were behind scroll arrows: the walk). With eight side tabs
    whole, the table's confidence column stays inside its viewport.
    """
    panel = window.folder
    assert panel.toolbar.minimumSizeHint().width() <= 400
    assert panel.minimumSizeHint().width() <= 800
    window.resize(1280, 720)
    card = window.findChild(QDockWidget, "model_card_dock")
    window.resizeDocks([card], [270], Qt.Horizontal)  # as on a real 1280×720 screen (the test's is 800×600)
    window.show_tab("folder")
    panel.toolbar.show_count(3, 5)
    qtbot.wait(50)
    shown = panel.toolbar.shown
    assert shown.isVisible() and shown.mapTo(panel, shown.rect().topRight()).x() <= panel.width()
    bar = panel.toolbar
    assert window.findChild(QDockWidget, "model_card_dock").isVisible() and panel.width() < 1000
    for control in (bar.open_button, bar.sort_button, bar.undo_button, bar.export_button,
                    bar.review_button, bar.threshold, bar.predicted, bar.min_conf, bar.correctness, bar.follow_map,
                    bar.reset_button):
        corner = control.mapTo(panel, control.rect().bottomRight())
        assert control.isVisible() and corner.x() <= panel.width() and corner.y() <= bar.geometry().bottom(), (
            control, corner, panel.width())
    side = panel.side  # every page's title whole and in sight in the side's list
    assert all(_title_whole(side, i) for i in range(side.count()))
    titles = [side.tabText(i) for i in range(side.count())]
    assert {"Similar images", "Label review", "Duplicates"} <= set(titles), titles
    header = panel.table.horizontalHeader()  # beside them the table keeps its confidence column in sight
    right = header.sectionPosition(3) + header.sectionSize(3)
    assert side.count() >= 9 and right <= panel.table.viewport().width(), (right, panel.table.viewport().width())
    wrapped = bar.height()
    window.resize(1280 + 900, 720)  # room for one line each: the rows unwrap
    qtbot.wait(50)
    assert bar.height() < wrapped
    # nor taller than the room there is: the page scrolls only if it must (pyqtgraph's 640×480 size hint for the
    # map made the page ask for 738 px where 495 were left)
    assert panel.side.page("map").map.sizeHint().height() <= 240
    area = panel.parentWidget()  # the tab's scroll area (its viewport holds the page's holder)
    while not isinstance(area, QScrollArea):
        area = area.parentWidget()
    assert panel.height() <= area.viewport().height() + 1, (panel.height(), area.viewport().height())


def _title_whole(side, index: int) -> bool:
    """Page `index`'s title is drawn whole inside the side's list (not cut by its width, not below its bottom)."""
    rect, view = side.title_rect(index), side.nav.viewport()
    wanted = side.nav.fontMetrics().horizontalAdvance(side.tabText(index))
    return rect.isValid() and rect.bottom() <= view.height() and rect.left() + wanted <= view.width()


def test_twenty_folder_pages_fit_a_laptop_screen_with_every_title_whole(window, qtbot):
    """The Folder tab holds twenty pages at 1280×720: eleven more pages (two of them with long titles) in every group
    leave the window no wider and every title whole in the side's list (a tab bar of nine had renamed Duplicates
    to fit); each one is shown by its entry in the list. [window]"""
    from PySide6.QtWidgets import QLabel

    from vitstudio.app.pages import GROUPS

    window.resize(1280, 720)
    card = window.findChild(QDockWidget, "model_card_dock")
    window.resizeDocks([card], [270], Qt.Horizontal)
    window.show_tab("folder")
    side = window.folder.side
    before = side.count()
    titles = [f"Page {i}" if i % 5 else f"Per-class calibration {i}" for i in range(11)]
    for i, title in enumerate(titles):
        side.addTab(QLabel(title), title, GROUPS[i % len(GROUPS)])
    qtbot.wait(50)
    assert side.count() == before + 11 >= 20
    assert window.width() <= 1280 and window.minimumSizeHint().width() <= 1280
    side.nav.setCurrentItem(side.nav.topLevelItem(3).child(0))  # the last group's first page, picked in the list
    assert side.currentWidget() is side.page("concepts") and side.group_of(side.currentIndex()) == GROUPS[3]
    assert side.currentWidget().isVisible()
    for i in range(side.count()):  # every title is the whole text it was given, scrolled into sight if need be
        side.nav.scrollToItem(side._items[i])
        assert _title_whole(side, i), side.tabText(i)


def test_distance_plot_title_is_cut_not_clipped(qtbot):
    """A long distance-plot title is elided with "…" and full tooltip; widening shows it whole. The title names what it
    was measured on first ("Folder …, 40 images: attention distance per head"), so the elided part is never that (the
    walk could not tell image from folder).
    """
    from vitstudio.gui.explore.distance_plot import DistancePlotWidget

    plot = DistancePlotWidget()
    qtbot.addWidget(plot)
    plot.resize(260, 200)
    plot.show()
    plot.set_distance(np.full((3, 2), 16.0), "folder digits-with-a-long-name, 40 images")
    qtbot.wait(20)
    title = plot.plotItem.titleLabel.text
    whole = "Folder digits-with-a-long-name, 40 images: attention distance per head"  # the source first (walk)
    assert title.endswith("…") and whole.startswith(title[:-1]) and plot.toolTip() == whole
    label = plot.plotItem.titleLabel  # the text drawn fits the label's box
    assert label.item.boundingRect().width() <= plot.width()
    plot.resize(900, 200)
    qtbot.wait(20)
    assert plot.plotItem.titleLabel.text == whole


def test_a_refused_sort_is_reported_without_a_modal_box(window, qtbot, monkeypatch, digits):
    """The refusal goes to the window's status bar and error indicator: the whole window.

    Sorting into a folder inside the opened one shows no modal box, lights the error indicator and creates nothing.
    [window]
    """
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))
    window.show_tab("folder")
    panel, data = window.folder, digits
    _open(panel, qtbot, data)
    inside = data / "sorted"  # an output folder inside the opened one is refused
    monkeypatch.setattr("vitstudio.gui.file_dialogs.choose_folder", lambda *a, **k: str(inside))
    boxes = []
    monkeypatch.setattr("PySide6.QtWidgets.QMessageBox.warning", lambda *a, **k: boxes.append(a))
    monkeypatch.setattr("PySide6.QtWidgets.QMessageBox.question", lambda *a, **k: boxes.append(a))
    panel._sort_dialog()
    assert boxes == []  # nothing blocks the window
    assert window.error_indicator.isVisible() and "Sort into folders" in window.statusBar().currentMessage()
    assert not inside.exists()
