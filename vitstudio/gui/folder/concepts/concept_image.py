"""The current image through the concepts: the chosen concept's map over the crop, the concepts strongest on the
image and at a clicked patch, the prediction with the chosen concept switched off or scaled (the SAE's error kept, so
nothing switched off is the model itself), and the concepts that drive the predicted class (activation × gradient)."""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.concept_jobs import image_job

from ... import workers
from ...common.bind import bind
from ...common.map_view import MapView

SHOWN = 8


class ConceptImageWidget(QWidget):
    concept_selected = Signal(int)
    show_requested = Signal()

    def __init__(self, tab, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tab = tab
        self.view_state = tab.model.image_state
        self.jobs = workers.ViewJobs(self.view_state, {"image": ("path", "file", "scales")})
        self.map = MapView()
        self.map.setMinimumSize(150, 150)
        self.map.setMaximumSize(240, 240)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.off = QCheckBox("Switch it off")
        self.scale = QDoubleSpinBox(singleStep=0.25, prefix="× ")  # its range and value: the state's (bind)
        self.scale.setToolTip("Scale the chosen concept at its block (1: unchanged)")
        self.show_button = QPushButton("Show in the Attention tab")
        self.prediction = QLabel()
        self.prediction.setWordWrap(True)
        self.strongest, self.drivers = QListWidget(), QListWidget()
        row = QHBoxLayout()
        row.addWidget(self.off)
        row.addWidget(self.scale)
        side = QVBoxLayout()  # beside the map: what it shows, the switch, the prediction
        side.addWidget(self.caption)
        side.addLayout(row)
        side.addWidget(self.show_button)
        side.addWidget(self.prediction)
        side.addStretch(1)
        top = QHBoxLayout()
        top.addWidget(self.map)
        top.addLayout(side, 1)
        lists = QHBoxLayout()
        for title, widget in (("Strongest here", self.strongest), ("Drive the prediction", self.drivers)):
            column = QVBoxLayout()
            column.addWidget(QLabel(title))
            column.addWidget(widget)
            lists.addLayout(column)
        box = QVBoxLayout(self)
        box.addLayout(top)
        box.addLayout(lists, 1)
        bind(self.off, self.view_state, "off")
        bind(self.scale, self.view_state, "scale")
        self.view_state.events.off.connect(self._on_factor)
        self.view_state.events.scale.connect(self._on_factor)
        self.show_button.clicked.connect(self.show_requested)
        self.map.patch_clicked.connect(self._on_patch)
        for widget in (self.strongest, self.drivers):
            widget.itemClicked.connect(self._on_item)
        tab.model.app.image_selected.connect(self._on_image)  # the one selection (a folder row picked becomes it)

    @property
    def result(self):
        """The ImageConcepts of the current model, image, file and factors, or None."""
        done = self.jobs.current("image")
        return done[0] if done is not None else None

    def current_image(self):
        """(uid, path, picture) of the current image (the app's selection), or Nones."""
        entry = self.tab.model.app.selected
        if entry is not None and entry.image is not None:
            return entry.uid, entry.path, entry.image
        return None, None, None

    def _on_image(self, _entry) -> None:
        self.refresh()

    def _on_factor(self, *_args) -> None:
        self.refresh()

    def _on_patch(self, row: int, col: int) -> None:
        self.view_state.update(patch=(row, col))
        self._draw()

    def _on_item(self, item: QListWidgetItem) -> None:
        if item.data(256) is not None:  # not the "none fire" line
            self.concept_selected.emit(int(item.data(256)))

    def factors(self) -> tuple:
        return self.view_state.factors(self.tab.view_state.concept)

    def refresh(self) -> None:
        """Ask for the current request (once per model, image, file and factors), then draw what is known."""
        model, file = self.tab.model.app.model, self.tab.view_state.file if self.tab.concepts is not None else None
        uid, path, picture = self.current_image()
        self.view_state.update(model=model.uid if model is not None else None, image=uid, path=path, file=file,
                               scales=self.factors())
        ready = model is not None and file is not None and path is not None
        if ready and self.result is None and not self.jobs.running("image"):
            self.jobs.start("image", "Reading concepts", image_job, model, picture, path, file, self.factors(),
                            on_result=self._on_result, on_error=self._on_error)
        self._draw()

    def _on_result(self, done) -> None:
        strongest = done[0].top_overall(1)
        if not self.tab.view_state.picked and strongest and strongest[0][0] != self.tab.view_state.concept:
            self.tab.select_concept(strongest[0][0], picked=False)  # opens on what fires here, not on concept 0
            return
        self._draw()

    def _on_error(self, exc: BaseException) -> None:
        self.caption.setText(f"Could not read the concepts of this image: {exc}")
        self.tab.model.app.report(exc)

    def _draw(self) -> None:
        result, concept = self.result, self.tab.view_state.concept
        self.show_button.setEnabled(self.tab.concepts is not None)
        if result is None:  # nothing of another model, image or file stays: the map, the lists, the prediction
            self.map.set_map(None)
            self.strongest.clear()
            self.drivers.clear()
            self.prediction.clear()
            self.caption.setText("Select an image (a row of the table, or the strip) once concepts are learned or "
                                 "opened." if self.tab.concepts is None or self.view_state.path is None
                                 else "Reading the concepts of this image…")
            return
        picture, model = self.jobs.current("image")[1], self.tab.model.app.model
        self.map.set_image(np.asarray(model.crop(picture).convert("RGB")))
        values = result.maps[..., concept] if concept < result.maps.shape[-1] else None
        self.map.set_map(values, "inferno", 0.6)
        self.map.set_marker(self.view_state.patch)
        top = result.top_at(self.view_state.patch, SHOWN) if self.view_state.patch else result.top_overall(SHOWN)
        where = f"at patch {self.view_state.patch}" if self.view_state.patch else "on this image"
        peak = float(values.max()) if values is not None else 0.0
        self.caption.setText(f"Concept {concept} on {os.path.basename(self.view_state.path)} " + (
            f"(strongest {peak:.3g}); click a patch for the concepts there." if peak > 0 else
            "does not fire on this image; click a patch for the concepts there."))
        self._fill(self.strongest, [(c, f"{c}: {v:.3g}") for c, v in top], f"none fire {where}")
        drivers = [] if result.drivers is None else [
            (int(c), f"{int(c)}: {result.drivers[c]:+.3g}") for c in np.argsort(-np.abs(result.drivers))[:SHOWN]
            if result.drivers[c] != 0]
        self._fill(self.drivers, drivers, "no class to attribute")
        self.prediction.setText(self._prediction_text(result, model))

    @staticmethod
    def _fill(widget: QListWidget, items: list, empty: str) -> None:
        widget.clear()
        for concept, text in items:
            item = QListWidgetItem(text)
            item.setData(256, concept)
            widget.addItem(item)
        if not items:
            widget.addItem(empty)

    @staticmethod
    def _prediction_text(result, model) -> str:
        def top(probs):
            order = np.argsort(-probs)[:2]
            return ", ".join(f"{model.labels[i] if i < len(model.labels) else i} {probs[i]:.1%}" for i in order)

        if result.before is None:
            return "This model has no classes (features only): nothing to switch a concept off against."
        if result.after is None:
            return f"Predicted: {top(result.before)}."
        what = ", ".join(f"concept {c} {'off' if f == 0 else f'× {f:g}'}" for c, f in result.scales.items())
        return f"Predicted: {top(result.before)}; with {what}: {top(result.after)}."
