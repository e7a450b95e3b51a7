"""The Training panel's Results page (issue 29 item 14): showing a run's results must not stall the GUI thread.
The soak's longest stalls (0.35-0.8 s, every History click and every run's end) were the confusion matrix's
counts, one pyqtgraph TextItem per cell made and placed on the GUI thread, and all of it made again when the
gallery's thumbnails arrived from their worker."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image


def _report(classes: int, tmp_path=None):
    from vitstudio.core.train.evaluation import EvalReport, Misclassified

    confusion = np.arange(classes * classes, dtype=np.int64).reshape(classes, classes)
    wrong = ()
    if tmp_path is not None:
        path = tmp_path / "wrong.png"
        Image.new("RGB", (20, 20), (200, 30, 30)).save(path)
        wrong = (Misclassified(str(path), 0, 1, 0.9),)
    return EvalReport(tuple(f"c{i}" for i in range(classes)), confusion, wrong, ())


@pytest.fixture
def results(qtbot):
    from vitstudio.gui.training.training_results import RunResultsWidget

    widget = RunResultsWidget()
    widget.resize(700, 500)
    qtbot.addWidget(widget)
    widget.show()
    return widget


def test_the_matrix_is_the_same_few_items_for_any_number_of_classes(results):
    """The confusion plot holds the same ≤ 3 items for 3 and 12 classes; the image and the painted counts equal the
    report's confusion; None clears both.
    """
    results.show_report(_report(3))
    few = len(results.cm_view.items)
    results.show_report(_report(12))
    assert len(results.cm_view.items) == few <= 3  # was 3 + 144: a TextItem per cell
    assert results.cm_item.image.shape == (12, 12)
    assert (results.cm_counts.counts == _report(12).confusion).all()
    results.show_report(None)
    assert results.cm_item.image is None and results.cm_counts.counts.size == 0


def test_the_counts_are_drawn_in_their_cells(results, qtbot):
    """The rendered plot differs with the counts item hidden (the counts are painted) and the item covers the matrix in
    scene coordinates.
    """
    results.show_report(_report(4))
    qtbot.wait(50)
    with_counts = results.confusion.grab().toImage()
    results.cm_counts.hide()
    qtbot.wait(50)
    without = results.confusion.grab().toImage()
    assert with_counts != without  # the counts are painted over the matrix
    results.cm_counts.show()
    rect = results.cm_counts.mapRectToScene(results.cm_counts.boundingRect())
    assert rect.width() > 0 and rect.height() > 0


def test_thumbnails_fill_the_gallery_without_drawing_the_report_again(results, tmp_path):
    """A late gallery of another report is ignored; the shown report's thumbnails become the icons of the same list
    items.
    """
    from vitstudio.app.training_jobs import make_thumbnails

    report = _report(3, tmp_path)
    results.show_report(report)
    item = results.gallery.item(0)
    assert item.icon().isNull()
    results.show_thumbnails(_report(3, tmp_path), make_thumbnails(report))  # another run's, late: ignored
    assert results.gallery.item(0).icon().isNull()
    results.show_thumbnails(report, make_thumbnails(report))
    assert results.gallery.item(0) is item and not item.icon().isNull()  # the same line, now with its picture


def test_gallery_cells_never_overlap_once_thumbnails_arrive(results, tmp_path, qtbot):
    """Captions are listed first and pictures of several shapes arrive later: every item keeps a cell of its own
    (the walk saw icons and captions stacked on each other).

    12 captions listed first, thumbnails of 12 shapes arriving later: every item has its own cell, no two item
    rectangles intersect, each as tall as a thumbnail (issue 49 item 1: they were stacked).
    """
    from vitstudio.app.training_jobs import make_thumbnails
    from vitstudio.core.train.evaluation import EvalReport, Misclassified

    wrong = []
    for i in range(12):
        path = tmp_path / f"w{i}.png"
        Image.new("RGB", (40 + 12 * i, 30 + 3 * i), (20 * i, 90, 200)).save(path)
        wrong.append(Misclassified(str(path), i % 2, 1 - i % 2, 0.9))
    report = EvalReport(("ants", "bees"), np.array([[5, 6], [6, 5]]), tuple(wrong), ())
    results.show_report(report)
    qtbot.wait(10)
    results.show_thumbnails(report, make_thumbnails(report))
    qtbot.wait(10)
    gallery = results.gallery
    rects = [gallery.visualItemRect(gallery.item(i)) for i in range(gallery.count())]
    assert len(rects) == 12 and len({(r.x(), r.y()) for r in rects}) == 12
    assert not [(i, j) for i in range(12) for j in range(i) if rects[i].intersects(rects[j])]
    assert all(r.height() >= gallery.iconSize().height() for r in rects)  # a picture and its caption fit
