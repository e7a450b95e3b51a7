"""The Folder tab's Paint page as a widget (issue 52): mouse drags on the canvas paint the current image at its own
pixels (widget coordinates mapped to the image's), the overlay shows the paint and then the segmentation, Ctrl+Z
takes a drag back. The page's model runs its jobs in the test's thread (ScriptRunner): what the model does is tested
in tests/app/test_paint_page.py; here only what the widget shows and how the mouse reaches the model."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from vitstudio.app.app_state import AppState
from vitstudio.app.folder_model import FolderModel
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.pages.paint import PaintPageModel
from vitstudio.app.paint_masks import UNPAINTED
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.gui.common.class_colours import PAINTED_ALPHA, PALETTE, SEGMENTED_ALPHA
from vitstudio.gui.folder.pages.paint_page import PaintPage


@pytest.fixture
def page(qtbot, tmp_path):
    from vitstudio.core.models.loading import load_model

    app = AppState()
    app.set_model(load_model(str(bundled_demo()), None, "cpu", "fp32"))
    folder = FolderModel(app, ScriptRunner())
    view = PaintPage(PaintPageModel(folder))
    qtbot.addWidget(view)
    view.canvas.setFixedSize(320, 320)  # a 32 px digit drawn 10 screen pixels a pixel: centres at whole points
    view.show()
    folder.open_paths([str(render_digits(tmp_path / "digits", 1))])
    folder.select(folder.results.paths.index(sorted(folder.results.paths)[0]))
    return view


def _drag(canvas, pixels: list[tuple[int, int]]) -> None:
    """A left-button drag through these image pixels, as the mouse sends it (press, moves holding, release)."""
    points = [QPointF(QPoint(round(x * 10 + 5), round(y * 10 + 5))) for x, y in pixels]
    kinds = [(QEvent.MouseButtonPress, Qt.LeftButton, Qt.LeftButton)]
    kinds += [(QEvent.MouseMove, Qt.NoButton, Qt.LeftButton)] * (len(points) - 2)
    kinds += [(QEvent.MouseMove, Qt.NoButton, Qt.LeftButton), (QEvent.MouseButtonRelease, Qt.LeftButton, Qt.NoButton)]
    for point, (kind, button, buttons) in zip([*points[:-1], points[-1], points[-1]], kinds):
        offset = QPointF(canvas.image_rect().topLeft())
        event = QMouseEvent(kind, point + offset, canvas.mapToGlobal(point + offset), button, buttons,
                            Qt.NoModifier)
        QApplication.sendEvent(canvas, event)


def test_a_mouse_drag_paints_the_image_pixels_under_it_and_the_overlay_shows_them(page, qtbot):
    """A left-button drag on the canvas paints exactly the image pixels within the brush of the path (widget coordinates
    mapped to the 32 px digit's own pixels), the overlay shows them in the object's colour and nothing elsewhere; a
    background drag segments the image (the faint colour on unpainted pixels, the classes' areas below); renaming the
    classes (and adding one) renames the brush's picker, a single name is refused and the names in use come back; Ctrl+Z
    in the page takes the whole background drag back and the segmentation goes; Undo and Redo are enabled only when
    there is a step to take.
    """
    model, canvas = page.model, page.canvas
    assert not page.undo_button.isEnabled() and not page.redo_button.isEnabled()  # nothing painted yet
    assert canvas.picture is not None and (canvas.picture.width(), canvas.picture.height()) == (32, 32)
    page.radius.setValue(2)
    page.brush_class.setCurrentIndex(page.brush_class.findText("object"))
    _drag(canvas, [(10, 16), (15, 16), (20, 16)])
    yy, xx = np.mgrid[:32, :32]
    under = np.hypot(xx - np.clip(xx, 10, 20), yy - 16) <= 2  # within the brush of the path, in image pixels
    mask = model.paint.mask(model.image)
    assert ((mask == 1) == under).all() and (mask[~under] == UNPAINTED).all()
    painted = canvas.overlay.pixelColor(15, 16)
    assert (painted.red(), painted.green(), painted.blue(), painted.alpha()) == (*PALETTE[1], PAINTED_ALPHA)
    assert canvas.overlay.pixelColor(15, 25).alpha() == 0 and page.areas.text() == ""  # no background yet

    page.brush_class.setCurrentIndex(page.brush_class.findText("background"))
    _drag(canvas, [(0, 0), (31, 0)])
    assert len(model.paint.undo_steps) == 2 and model.shown is not None  # segmented from the paint
    segmented = canvas.overlay.pixelColor(20, 28)  # not painted: the segmentation's faint colour
    assert segmented.alpha() == SEGMENTED_ALPHA and "object" in page.areas.text()

    page.classes.setText("paper, ink, smudge")  # renamed and one added: the brush's picker follows
    page.classes.editingFinished.emit()
    assert [page.brush_class.itemText(i) for i in range(page.brush_class.count())] == ["paper", "ink", "smudge"]
    page.classes.setText("paper")  # refused: the names in use come back
    page.classes.editingFinished.emit()
    assert page.classes.text() == "paper, ink, smudge" and model.line.startswith("The classes are two or more")

    page.activateWindow()
    canvas.setFocus()
    qtbot.keyClick(canvas, Qt.Key_Z, Qt.ControlModifier)  # the page's Ctrl+Z: the background drag goes
    assert set(np.unique(model.paint.mask(model.image))) == {1, UNPAINTED} and page.redo_button.isEnabled()
    assert canvas.overlay.pixelColor(15, 0).alpha() == 0 and model.shown is None


def test_the_focus_stays_on_the_page_while_the_folder_is_segmented(page, qtbot):
    """Segment folder disabled the button that had the focus, and Qt handed it to the next widget of the window's
    chain: the model bar's Model field, where the next keys typed replaced the model's name. Cancel takes the focus
    while the folder is segmented, Segment folder again when it is done."""
    page.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is page.window())
    page.segment_button.setFocus()
    assert QApplication.focusWidget() is page.segment_button
    page.model.busy.emit(True)
    assert QApplication.focusWidget() is page.cancel_button and not page.segment_button.isEnabled()
    page.model.busy.emit(False)
    assert QApplication.focusWidget() is page.segment_button and not page.cancel_button.isVisible()
