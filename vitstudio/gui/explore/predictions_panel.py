"""Top-k bars with label names and probabilities, and the exact crop the model saw beside the original."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from ..imaging import pil_to_pixmap, set_scaled_pixmap
from ..state import AppState, ImageEntry

ROWS = 5


class PredictionsPanel(QWidget):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
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
        layout = QVBoxLayout(self)
        layout.addLayout(images, 1)
        layout.addWidget(self.title)
        layout.addLayout(grid)
        state.image_selected.connect(self._on_image_selected)
        state.prediction_ready.connect(self._on_prediction_ready)
        state.model_loaded.connect(lambda _m: self._show(self.state.selected))
        self._show(None)

    def _on_image_selected(self, entry: ImageEntry | None) -> None:
        self._show(entry)

    def _on_prediction_ready(self, entry: ImageEntry) -> None:
        if entry is self.state.selected:
            self._show(entry)

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
        elif self.state.model is None:
            self.title.setText(f"{entry.path}<br>No model loaded: choose one above and press Load.")
        elif pred is None:
            self.title.setText(f"{entry.path}<br>Classifying…")
        else:
            self.title.setText(f"{entry.path}<br>Top-{len(pred.indices)} of {self.state.model.num_classes} "
                               f"classes · {self.state.model.display_name}")
        set_scaled_pixmap(self.original, pil_to_pixmap(entry.preview) if entry and entry.preview else None)
        set_scaled_pixmap(self.crop, pil_to_pixmap(pred.crop) if pred is not None and pred.crop is not None
                          else None)
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
