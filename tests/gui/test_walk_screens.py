"""What the third afternoon's walk saw at 1280×720 (issue 49, items 12 and 13): each test measures the geometry or
the drawing a screenshot showed wrong."""

from __future__ import annotations

import pytest


@pytest.fixture
def curves(qtbot):
    from vitstudio.gui.imaging import configure_pyqtgraph
    from vitstudio.gui.training.training_curves import TrainingCurvesView

    configure_pyqtgraph()
    view = TrainingCurvesView()
    qtbot.addWidget(view)
    view.resize(420, 560)
    view.show()
    return view


def _epochs(n: int) -> dict[str, list]:
    return {"epoch": list(range(1, n + 1)), "train_loss": [1.0] * n, "val_loss": [0.9] * n,
            "train_acc": [0.5] * n, "val_acc": [0.6] * n}


def test_one_epochs_curves_span_about_one_epoch_after_a_long_run(curves, qtbot):
    """After a 50-epoch run, the next run's first epoch spanned −24…26: a lone point kept the old range's width.

    After a 50-epoch run is cleared, one epoch's loss and accuracy plots span 0…2 on x (a lone point kept the old
    range's width: −28…30), three epochs about 1…3.
    """
    curves.draw_epochs(_epochs(50))
    qtbot.wait(20)
    curves.clear_curves()
    curves.draw_epochs(_epochs(1))
    qtbot.wait(20)
    for name, plot in curves.plots.items():
        low, high = plot.viewRange()[0]
        assert 0 <= low < 1 < high <= 2, (name, low, high)
    curves.draw_epochs(_epochs(3))
    qtbot.wait(20)
    assert all(plot.viewRange()[0][0] < 1 and 3 < plot.viewRange()[0][1] < 3.5 for plot in curves.plots.values())


def _in_sight(widget, top) -> bool:
    """Whether all of `widget` lies inside each of its parents up to `top` (a parent clips what overflows it)."""
    rect, child = widget.rect(), widget
    while child is not top:
        rect = rect.translated(child.pos())
        child = child.parentWidget()
        if not child.rect().contains(rect):
            return False
    return True


def _tick_labels(axis) -> list[str]:
    """The tick labels `axis` draws at its present size (pyqtgraph leaves out one with no room for its text)."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(400, 400, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        return [text for _, _, text in axis.generateDrawSpecs(painter)[2]]
    finally:
        painter.end()


def test_the_attention_tabs_faithfulness_plots_keep_their_key_labels_and_first_tick(panel, qtbot):
    """At the size the Attention tab gets at 1280×720: the curves' key is their title (a legend box covered the
    curves and was cut off), both plots show their x axis' label, and the sanity plot labels its first step.

    [panel]
    """
    from vitstudio.core.models.demo import bundled_demo, sample_images
    from vitstudio.gui.explore.attention_panel import AttentionPanel

    attention = panel(AttentionPanel, model=bundled_demo(), images=sample_images()[:1])
    attention.resize(846, 611)
    attention.view_state.update(method="rollout")
    widget = attention.faithfulness
    widget.measure()
    widget.check_sanity()
    qtbot.waitUntil(lambda: widget.shown is not None and widget.shown_sanity is not None, timeout=60000)
    qtbot.wait(50)
    assert widget.curves.plotItem.legend is None and "insertion" in widget.curves.plotItem.titleLabel.text
    for plot in (widget.curves, widget.spearman):
        assert _in_sight(plot, attention)
        label = plot.getAxis("bottom").label
        text = label.boundingRect().adjusted(0, 0, 0, -label.document().documentMargin())
        assert label.isVisible() and label.mapRectToScene(text).bottom() <= plot.height()
    assert _tick_labels(widget.spearman.getAxis("bottom"))[0] == "head"


def test_the_attention_controls_keep_one_width_for_every_method(panel, qtbot):
    """The controls column followed each method's labels, so the map beside it moved with the method.

    The map keeps its place and width as every method is chosen in turn (the controls column followed each method's
    labels). [panel]
    """
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.gui.explore.attention_panel import AttentionPanel

    attention = panel(AttentionPanel, model=bundled_demo())
    attention.resize(846, 611)
    places = set()
    for method in attention.methods:
        attention.view_state.update(method=method)
        qtbot.wait(10)
        places.add((attention.view.x(), attention.view.width()))
    assert len(places) == 1, places


def _arrow_points_up(header, section: int) -> bool:
    """Whether the sort arrow drawn in `section` narrows towards its top (▲) rather than its bottom (▼)."""
    image = header.grab().toImage()
    right = header.sectionViewportPosition(section) + header.sectionSize(section)
    widths = []  # dark pixels per row at the section's right end, where the arrow is drawn
    for y in range(image.height()):
        dark = sum(image.pixelColor(x, y).lightness() < 140 for x in range(right - 24, right - 2))
        if dark:
            widths.append(dark)
    assert len(widths) >= 3, widths  # an arrow was drawn
    return widths[0] < widths[-1]


def test_a_sort_arrow_reads_as_the_order_shown(qtbot):
    """Fusion drew a column sorted most-first (the Concepts table's) with ▲ and a least-first one with ▼.

    Under the application's style a column sorted descending (most first, as the Concepts table) draws ▼ and ascending
    draws ▲, read from the header's pixels (Fusion drew them the other way round).
    """
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QTableWidget, QTableWidgetItem

    from vitstudio.gui.common.wheel_guard import install_wheel_guard

    install_wheel_guard()  # the application's style, as the window sets it
    table = QTableWidget(4, 2)
    table.setSortingEnabled(True)  # as the Concepts table: the header shows its sort indicator
    qtbot.addWidget(table)
    for row in range(4):
        item = QTableWidgetItem()
        item.setData(Qt.DisplayRole, row * 7.5)  # sorted as numbers
        table.setItem(row, 0, item)
    table.resize(300, 200)
    table.show()
    table.sortItems(0, Qt.DescendingOrder)
    assert table.item(0, 0).text() == "22.5" and not _arrow_points_up(table.horizontalHeader(), 0)
    table.sortItems(0, Qt.AscendingOrder)
    assert table.item(0, 0).text() == "0" and _arrow_points_up(table.horizontalHeader(), 0)


def test_the_training_forms_dataset_line_names_what_it_cannot_use_and_counts_strays(tmp_path):
    """The form's line under the dataset said "2 file(s) skipped" for a broken image and a notes.txt alike: the
    image is named as one the run cannot use, the note only counted (DatasetScan.failed / .ignored)."""
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.data.datasets import scan_dataset
    from vitstudio.gui.training.training_form import describe_scan

    root = make_dataset(tmp_path / "colours", per_class=4)
    (root / "red" / "broken.png").write_bytes(b"\x89PNG broken")
    (root / "blue" / "notes.txt").write_text("a note")
    text = describe_scan(scan_dataset(root), {}, 0)
    assert "1 file(s) cannot be used: broken.png" in text and "notes.txt" not in text
    assert "1 other file(s) are not images or not in a class folder." in text


def _scroll_area(widget):
    """The nearest scroll area holding `widget` (a main tab's, for a panel)."""
    from PySide6.QtWidgets import QScrollArea

    area = widget.parentWidget()
    while not isinstance(area, QScrollArea):
        area = area.parentWidget()
    return area


def test_every_tab_fits_the_first_window_on_a_1280_by_720_screen(window, qtbot, tmp_path):
    """The first window on a 1280×720 screen (1272×680, the Log a tab behind the Model card) needs no dock closed:
    no main tab scrolls (Attention's minimum was 592 px where 571 are left; Compare, its Match page too, was sized
    to its preferred height for its width, 658 px, and scrolled though it fits in its minimum); Teach's cards are
    whole beside the preview, each card's Hold to record and probability bar in sight (the column was squeezed to
    ~250 px and the cards scrolled sideways); the Folder tab's action row takes at most two lines, its map keeps
    250 px and no page of its side scrolls sideways (Map, Label review and Paint did); the Training form keeps
    300 px. [window]
    """
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QDockWidget, QTabWidget

    from tests.gui.helpers import load_in_window, settle
    from vitstudio.core.models.demo import bundled_demo, render_digits, sample_images
    from vitstudio.gui.tab_names import TABS

    card = window.findChild(QDockWidget, "model_card_dock")
    assert [d.objectName() for d in window.tabifiedDockWidgets(card)] == ["log_dock"]  # the test's screen is short
    window.resize(1272, 680)  # what the first window gets on a 1280×720 screen (screen_fit.FRAME_GUESS kept free)
    window.resizeDocks([card], [270], Qt.Horizontal)  # as there (the test's screen is 800×600)
    load_in_window(window, qtbot, str(bundled_demo()))
    window.add_paths([str(p) for p in sample_images()[:2]])
    digits = render_digits(tmp_path / "digits", 2)
    teach = window.teach
    teach.open_project(str(tmp_path / "project"))
    for name in ("0", "1"):
        teach._act(teach.teach.add_class, name)
        teach._act(teach.teach.add_files, name, sorted((digits / name).glob("*.png")))
    settle(qtbot)
    scrolling = []
    for attr, _title in TABS:
        window.show_tab(attr)
        pages = window.compare.findChild(QTabWidget) if attr == "compare" else None
        for index in range(pages.count()) if pages else [None]:
            if pages:
                pages.setCurrentIndex(index)
            qtbot.wait(20)
            area = _scroll_area(getattr(window, attr))
            if area.verticalScrollBar().isVisible() or area.horizontalScrollBar().isVisible():
                scrolling.append((attr, index))
    assert not scrolling, scrolling
    window.show_tab("teach")
    qtbot.wait(20)
    assert len(teach.cards) == 2
    for widget in teach.cards.values():
        assert _in_sight(widget.record, teach) and _in_sight(widget.bar, teach) and widget.bar.width() >= 100
    window.show_tab("folder")
    qtbot.wait(20)
    folder = window.folder
    bar = folder.toolbar
    lines = {w.mapTo(bar, w.rect().topLeft()).y() for w in (bar.open_button, bar.review_button, bar.views_button,
                                                             bar.threshold.parentWidget())}
    assert len(lines) <= 2, lines
    plot = folder.side.page("map").map
    assert _in_sight(plot, folder) and plot.height() >= 250, plot.height()
    sideways = []  # beside the table every page of the side is whole (Map, Label review and Paint scrolled)
    for index in range(folder.side.count()):
        folder.side.setCurrentWidget(folder.side.widget(index))
        qtbot.wait(10)
        if _scroll_area(folder.side.widget(index)).horizontalScrollBar().isVisible():
            sideways.append(folder.side.tabText(index))
    assert not sideways, sideways
    window.show_tab("training")
    qtbot.wait(20)
    form = _scroll_area(window.training.dataset)
    assert form.height() >= 300, form.height()
