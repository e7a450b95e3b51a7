"""Shared behaviour of the analysis panels: follow the current model and image, compute only when visible."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from .. import workers
from ..state import AppState, ImageEntry
from .map_view import GUI_COLORMAPS


def layer_slider() -> tuple[QSlider, QLabel, QHBoxLayout]:
    """A layer slider with its 'layer N' label, laid out in a row."""
    slider, label = QSlider(Qt.Horizontal), QLabel("layer –")
    slider.valueChanged.connect(lambda v: label.setText(f"layer {v}"))
    row = QHBoxLayout()
    row.addWidget(slider, 1)
    row.addWidget(label)
    return slider, label, row


def colormap_combo() -> QComboBox:
    combo = QComboBox()
    combo.addItems(GUI_COLORMAPS)
    return combo


def controls_column(form: QFormLayout, *below: QWidget) -> QWidget:
    """The left column of an explorer: the form, then `below` widgets, then stretch."""
    column = QWidget()
    column.setMaximumWidth(330)
    layout = QVBoxLayout(column)
    layout.addLayout(form)
    for widget in below:
        layout.addWidget(widget)
    layout.addStretch(1)
    return column


def wrapping_label() -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    return label


class ExplorerPanel(QWidget):
    """Subclasses implement `reload()` (start jobs for the current model+image) and `export_data()`.

    State changes while the panel is hidden only mark it stale; it recomputes when shown, so that a tab
    nobody looks at costs nothing.
    """

    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self._stale = True
        self._debounce = QTimer(self, singleShot=True, interval=120)  # slider-driven work is throttled
        self._debounce.timeout.connect(self._debounced)
        self._debounced_fn = None
        state.model_loaded.connect(self._on_context_changed)
        state.image_selected.connect(self._on_context_changed)

    # -- what to explain -------------------------------------------------------------------------
    def context(self) -> tuple[object, ImageEntry] | None:
        """(model, entry) when both exist and the image is readable."""
        entry, model = self.state.selected, self.state.model
        if model is None or entry is None or entry.image is None:
            return None
        return model, entry

    def _on_context_changed(self, *_args) -> None:
        self._stale = True
        if self.isVisible():
            self._refresh_now()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._stale:
            self._refresh_now()

    def _refresh_now(self) -> None:
        self._stale = False
        self.reload()

    def later(self, fn) -> None:
        """Run `fn` once the user has stopped moving a control for a moment."""
        self._debounced_fn = fn
        self._debounce.start()

    def _debounced(self) -> None:
        if self._debounced_fn is not None:
            self._debounced_fn()

    def report_error(self, exc: BaseException | str) -> None:
        self.state.message.emit("error", exc if isinstance(exc, str) else workers.describe(exc))
