"""Top-k bars with label names and probabilities, and the exact crop the model saw beside the original."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from vitstudio.app.app_state import ImageEntry
from vitstudio.app.model_facts import fit_line, no_classes_text, unlike_words

from ..common.ood_banner import OODBannerWidget
from ..imaging import pil_to_pixmap, set_scaled_pixmap

ROWS = 5


class PredictionsPanel(QWidget):
    def __init__(self, app, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state = app.state
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextSelectableByMouse)
        grid = QGridLayout()
        self.labels: list[QLabel] = []
        self.bars: list[QProgressBar] = []
        for row in range(ROWS):
            label, bar = QLabel(), QProgressBar()
            label.setMinimumWidth(160)
            label.setWordWrap(True)
            bar.setRange(0, 1000)
            bar.setTextVisible(True)
            grid.addWidget(label, row, 0)
            grid.addWidget(bar, row, 1)
            self.labels.append(label)
            self.bars.append(bar)
        grid.setColumnStretch(1, 1)
        self.original = QLabel(alignment=Qt.AlignCenter)
        self.crop = QLabel(alignment=Qt.AlignCenter)
        images = QGridLayout()
        images.addWidget(QLabel("Original"), 0, 0)
        images.addWidget(QLabel("What the model sees"), 0, 1)
        images.addWidget(self.original, 1, 0)
        images.addWidget(self.crop, 1, 1)
        for label in (self.original, self.crop):
            label.setMinimumSize(200, 200)
        self.banner = OODBannerWidget()  # most of the images unlike the model's training data
        layout = QVBoxLayout(self)
        layout.addWidget(self.banner)
        layout.addLayout(images, 1)
        layout.addWidget(self.title)
        layout.addLayout(grid)
        state.image_selected.connect(self._on_image_selected)
        state.prediction_ready.connect(self._on_prediction_ready)
        state.model_loaded.connect(self._on_model_loaded)
        state.model_loading.connect(self._on_load_changed)
        state.model_failed.connect(self._on_load_changed)
        # the share is of the images left. A bound method, never a lambda: the state outlives the panel, and a
        # lambda it holds (in C++, out of the collector's sight) kept the panel and the whole window alive
        state.images_removed.connect(self._on_images_removed)
        self._show(state.selected)  # built after images were opened (the window shows before torch has loaded)

    def _on_model_loaded(self, _model) -> None:
        self._show(self.state.selected)
        self._update_banner()

    def _on_load_changed(self, _what) -> None:
        self._show(self.state.selected)

    def _on_images_removed(self, _gone) -> None:
        self._update_banner()

    def _on_image_selected(self, entry: ImageEntry | None) -> None:
        self._show(entry)

    def _on_prediction_ready(self, entries: list[ImageEntry]) -> None:
        if any(entry is self.state.selected for entry in entries):
            self._show(self.state.selected)
        self._update_banner()

    def _update_banner(self) -> None:
        """The banner over every image classified by the current model (images still classifying wait)."""
        preds = [self.state.prediction_for(e) for e in self.state.images]
        scored = [p for p in preds if p is not None and p.ok and p.ood_calibrated]
        if not scored:
            self.banner.clear_share()
            return
        self.banner.show_share(sum(p.ood for p in scored), len(scored), unlike_words(self.state.model))

    def export_data(self):
        entry = self.state.selected
        pred = self.state.prediction_for(entry) if entry is not None else None
        if pred is None:
            return None
        return "predictions", list(pred.probs), {"image": entry.path, "model": self.state.model.name,
                                                 "labels": list(pred.labels), "indices": list(pred.indices)}

    def shown_rows(self) -> list[tuple[str, float]]:
        """(label, probability) currently displayed, for tests and export."""
        return [(lab.text(), bar.value() / 1000) for lab, bar in zip(self.labels, self.bars) if lab.text()]

    def _show(self, entry: ImageEntry | None) -> None:
        pred = self.state.prediction_for(entry) if entry is not None else None
        if entry is None:
            self.title.setText("Drop images or folders anywhere on the window (or File → Open).")
        elif entry.error:
            self.title.setText(f"<b>Cannot read</b> {entry.path}: {entry.error}")
        elif self.state.model is None and self.state.loading:
            self.title.setText(f"{entry.path}<br>Loading {html.escape(self.state.loading)}… (its predictions follow)")
        elif self.state.model is None:
            self.title.setText(f"{entry.path}<br>No model loaded: choose one above and press Load.")
        elif not self.state.model.labels:
            self.title.setText(f"{entry.path}<br>{no_classes_text(self.state.model)}")
        elif pred is None:
            self.title.setText(f"{entry.path}<br>Classifying…")
        else:
            self.title.setText(f"{entry.path}<br>Top-{len(pred.indices)} of {self.state.model.num_classes} "
                               f"classes · {self.state.model.display_name}<br>{fit_line(self.state.model, pred)}")
        set_scaled_pixmap(self.original, pil_to_pixmap(entry.preview) if entry and entry.preview else None)
        crop = pred.crop if pred is not None else None
        if crop is None and entry is not None and entry.image is not None and self.state.model is not None \
                and not self.state.model.labels:  # nothing to classify: still show what the model sees
            crop = self.state.model.crop(entry.image)
        set_scaled_pixmap(self.crop, pil_to_pixmap(crop) if crop is not None else None)
        for row in range(ROWS):
            if pred is not None and row < len(pred.indices):
                self.labels[row].setText(pred.labels[row])
                self.bars[row].setValue(round(pred.probs[row] * 1000))
                self.bars[row].setFormat(f"{pred.probs[row] * 100:.1f}%")
                self.bars[row].setVisible(True)
            else:
                self.labels[row].setText("")
                self.bars[row].setValue(0)
                self.bars[row].setVisible(False)
