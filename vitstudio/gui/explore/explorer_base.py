"""Shared behaviour of the analysis panels: a view state keyed to the current model and image, work only when
visible, controls that show only where the chosen method uses them."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.analyses import registry
from vitstudio.app.app_state import ImageEntry

from ..common.type_map import control_for


def layer_slider(slider: QSlider) -> tuple[QSlider, QLabel, QHBoxLayout]:
    """A layer slider with its 'layer N' label (the panel writes the label when its layer field changes: 'stage N'
    for Swin's embedding stages), laid out in a row."""
    label = QLabel("layer –")
    row = QHBoxLayout()
    row.addWidget(slider, 1)
    row.addWidget(label)
    return slider, label, row


def colormap_combo(state) -> QComboBox:
    return control_for(state.fields()["cmap"])  # filled from the field's choices (bind)


def smooth_checkbox(state) -> QCheckBox:
    box = control_for(state.fields()["smooth"], title="Smooth (bilinear)")
    box.setToolTip("Interpolate maps over the image as the CLI's pictures do; off shows one cell per patch")
    return box


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
    """A view of one of the App's explorers (`app.explorers[explorer_id]`, vitstudio/app/explorers.py): its
    `view_state` and `jobs` are the explorer's. Subclasses implement `reload()` (start the jobs the current state
    needs) and `export_data()`.

    The explorer keeps its state keyed to the current model and image, with fields clamped to that model, set in one
    update, so a result computed for another model or image is never drawn (its jobs are keyed by their request).
    State changes while the panel is hidden only mark it stale (and discard the jobs they made stale); it recomputes
    when shown, so that a tab nobody looks at costs nothing.
    """

    explorer_id = ""  # which of the App's explorers this draws
    DEBOUNCE_MS = 120  # slider-driven work waits this long for the control to stop (tests set 0: tests/gui/conftest)

    def __init__(self, app, parent: QWidget | None = None) -> None:
        """`app`: the App (vitstudio/app/app.py) this panel draws."""
        super().__init__(parent)
        self.app = app
        self.state = app.state
        self.explorer = app.explorers[self.explorer_id]
        self.view_state, self.jobs = self.explorer.state, self.explorer.jobs
        self._stale = True
        self._debounce = QTimer(self, singleShot=True, interval=self.DEBOUNCE_MS)  # slider-driven work is throttled
        self._debounce.timeout.connect(self._debounced)
        self._debounced_fn = None
        self.explorer.context_changed.connect(self._on_context_changed)

    # -- what to explain -------------------------------------------------------------------------
    def context(self) -> tuple[object, ImageEntry] | None:
        """(model, entry) when both exist, the image is readable and the view state is keyed to them."""
        entry, model = self.state.selected, self.state.model
        if model is None or entry is None or entry.image is None:
            return None
        return model, entry

    def _on_context_changed(self, *_changed) -> None:
        self._stale = True
        if self.isVisible():
            self._refresh_now()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._stale:
            self._refresh_now()

    def _refresh_now(self) -> None:
        self._stale = False
        self.redraw()  # first what the new request has (nothing yet): the previous model's map stayed until its job
        self.reload()

    def redraw(self) -> None:
        """Draw what the view state's results are now (nothing for a request not computed yet); panels override."""

    def later(self, fn) -> None:
        """Run `fn` once the user has stopped moving a control for a moment."""
        self._debounced_fn = fn
        self._debounce.start()

    def debouncing(self) -> bool:
        """Work is waiting for a control to stop moving."""
        return self._debounce.isActive()

    def _debounced(self) -> None:
        if self._debounced_fn is not None:
            self._debounced_fn()

    def report_error(self, exc: BaseException) -> None:
        self.state.report(exc)

    def record(self, method: str, params: dict, **extra) -> dict:
        """The parameter file of an export: the same format as the CLI's."""
        entry, model = self.state.selected, self.state.model
        image = entry.path if entry is not None and registry.get(method).needs_image else None
        return registry.record(method, params, model=model.name if model else None, image=image, **extra)
