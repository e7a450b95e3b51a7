"""The Paint page: the folder's current image with its classes over it — painted pixels strong, the segmentation
from the painted images faint — a brush (class, size) and an eraser, undo and redo (and Ctrl+Z, Ctrl+Shift+Z within
the page), the classes' names, "Segment folder" with its progress and Cancel, and Export…; drawn from its model
(`vitstudio.app.pages.paint.PaintPageModel`)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.pages.paint import PaintPageModel
from vitstudio.gui import file_dialogs
from vitstudio.gui.common.bind import bind
from vitstudio.gui.common.class_colours import overlay
from vitstudio.gui.common.flow_layout import wrapping_row
from vitstudio.gui.common.paint_canvas import PaintCanvas


class PaintPage(QWidget):
    page_id = "paint"

    def __init__(self, model: PaintPageModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.canvas = PaintCanvas()
        self.canvas.pressed.connect(model.press)
        self.canvas.dragged.connect(model.drag)
        self.canvas.released.connect(model.release)
        self.areas = QLabel()
        self.line = QLabel(model.line)
        self.line.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self._brush_row())
        layout.addLayout(self._classes_row())
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.areas)
        layout.addWidget(self.line)
        layout.addLayout(self._folder_row())
        model.changed.connect(self.draw)
        model.said.connect(self.line.setText)
        model.busy.connect(self._on_busy)
        model.progress.connect(self._on_progress)
        model.paint.state.events.radius.connect(self.canvas.set_brush_radius)
        model.paint.state.events.classes.connect(lambda names: self.classes.setText(", ".join(names)))
        self.canvas.set_brush_radius(model.paint.state.radius)
        self._on_busy(False)
        self.draw("picture")

    def _brush_row(self) -> QWidget:
        state = self.model.paint.state
        self.brush_class, self.erase, self.radius = QComboBox(), QCheckBox("Eraser"), QSpinBox()
        self.brush_class.setToolTip("The class the brush paints")
        self.radius.setToolTip("The brush's radius in the image's own pixels")
        self.radius.setPrefix("size ")
        for widget, field in ((self.brush_class, "brush_class"), (self.erase, "erase"), (self.radius, "radius")):
            bind(widget, state, field)
        self.undo_button, self.redo_button = QPushButton("Undo"), QPushButton("Redo")
        self.undo_button.setToolTip("Undo the last change: a stroke, a label, a sort (Ctrl+Z, as Edit → Undo)")
        self.redo_button.setToolTip("Redo the change undone (Ctrl+Shift+Z)")
        history = self.model.folder.undo  # the app's one undo stack: strokes among the other changes, in order
        self.undo_button.clicked.connect(history.undo)
        self.redo_button.clicked.connect(history.redo)
        history.changed.connect(self._show_history)
        # wraps: beside the table at 1280×720 the page is ~360 px wide, the row in one line ~440
        return wrapping_row((self.brush_class, self.erase, self.radius, self.undo_button, self.redo_button))

    def _classes_row(self) -> QHBoxLayout:
        self.classes = QLineEdit(", ".join(self.model.paint.state.classes))
        self.classes.setToolTip("The classes' names in index order, comma-separated (index 0 first: the masks' "
                                "pixel values); Return applies them")
        self.classes.editingFinished.connect(self._on_classes)
        self.open_button = QPushButton("Open painted…")
        self.open_button.setToolTip("Paint saved earlier: a folder of one PNG per painted image, named by the image's "
                                    "stem (an export's painted/, what `vitstudio segment --masks` reads)")
        self.open_button.clicked.connect(self._open_painted)
        row = QHBoxLayout()
        row.addWidget(QLabel("Classes"))
        row.addWidget(self.classes, 1)
        row.addWidget(self.open_button)
        return row

    def _folder_row(self) -> QHBoxLayout:
        self.segment_button, self.cancel_button = QPushButton("Segment folder"), QPushButton("Cancel")
        self.export_button = QPushButton("Export…")
        self.segment_button.setToolTip("Segment every image of the folder from the painted ones (in the background; "
                                       "painting again segments it again)")
        self.export_button.setToolTip("Write a mask PNG per image, masks.coco.json, areas.csv and the painted masks "
                                      "(painted/, what `vitstudio segment --masks` reads) into a folder you choose")
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.segment_button.clicked.connect(self.model.segment_folder)
        self.cancel_button.clicked.connect(self.model.cancel)
        self.export_button.clicked.connect(self._export)
        row = QHBoxLayout()
        for widget in (self.segment_button, self.progress, self.cancel_button, self.export_button):
            row.addWidget(widget)
        return row

    # -- drawing the model ---------------------------------------------------------------------------------------
    def draw(self, what: str) -> None:
        model = self.model
        self._show_history()
        if what == "picture":
            self.canvas.set_picture(model.picture)
        if model.picture is None:
            self.areas.clear()
            return
        shown = model.shown if model.shown is not None and model.shown.image == model.image else None
        self.canvas.set_overlay(overlay(model.paint.mask(model.image), shown.labels if shown else None,
                                        model.picture.shape[:2]))
        self.areas.setText("  ·  ".join(f"{name} {share:.0%}" for name, share in model.areas().items()))

    def _show_history(self) -> None:
        history = self.model.folder.undo
        self.undo_button.setEnabled(history.can_undo())
        self.redo_button.setEnabled(history.can_redo())

    # -- Ctrl+Z and Ctrl+Shift+Z within the page: the app's undo, also where no window's Edit menu is ----------
    @staticmethod
    def _history_key(event: QKeyEvent) -> str | None:
        if event.matches(QKeySequence.Undo):
            return "undo"
        redo = event.matches(QKeySequence.Redo) or event.keyCombination() == QKeySequence("Ctrl+Shift+Z")[0]
        return "redo" if redo else None

    def event(self, event) -> bool:
        """The keys are claimed before the window's Edit → Undo sees them (as a text field claims its own), while
        the focus is in the page: a window-wide shortcut and a page's for the same keys would be ambiguous to Qt,
        and neither would fire."""
        if event.type() == QEvent.ShortcutOverride and self._history_key(event):
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        step = self._history_key(event)
        if step is None:
            super().keyPressEvent(event)
        else:
            getattr(self.model.folder.undo, step)()

    def _on_classes(self) -> None:
        if not self.model.rename_classes(self.classes.text()):
            self.classes.setText(", ".join(self.model.paint.state.classes))  # refused: the names in use again

    def _on_busy(self, busy: bool) -> None:
        # a focused button disabled or hidden hands the focus to the next widget of the window's chain (it went to
        # the model bar's Model field, where typing replaced the model's name): the one taking its place gets it
        focused = any(w.hasFocus() for w in (self.segment_button, self.cancel_button, self.export_button))
        taking_over = self.cancel_button if busy else self.segment_button
        self.progress.setVisible(busy)
        taking_over.setVisible(True)
        taking_over.setEnabled(True)
        if focused:
            taking_over.setFocus(Qt.OtherFocusReason)
        self.cancel_button.setVisible(busy)
        self.segment_button.setEnabled(not busy)
        self.export_button.setEnabled(not busy)
        self.progress.setRange(0, 0)

    def _on_progress(self, progress) -> None:
        self.progress.setRange(0, max(progress.total, 0))
        self.progress.setValue(progress.done)

    def _open_painted(self) -> None:
        folder = file_dialogs.choose_folder(self, "Open the masks painted in which folder?")
        if folder:
            self.model.open_painted(folder)

    def _export(self) -> None:
        out = file_dialogs.choose_folder(self, "Export the masks into which folder?", create=True)
        if out:
            self.model.export(out)


PAGE = PaintPage
