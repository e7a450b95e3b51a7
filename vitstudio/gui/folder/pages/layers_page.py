"""The Layers page: at which depth does the class become readable? "Probe every block" reads the opened folder of
class folders once (every block's feature, cached per model), fits a k-fold linear probe per block and plots the
accuracy against depth with its spread, beside the logit lens's accuracy at each depth — the same figures as
`vitstudio layers FOLDER --model M`; drawn from its model (`vitstudio.app.pages.layers.LayersModel`)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from vitstudio.app.pages.layers import FEATURE_NOTE, LayersModel

from ...common.job_progress import show_progress
from ...common.small_plot import SmallPlotWidget


class LayersPage(QWidget):
    page_id = "layers"

    def __init__(self, model: LayersModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.run_button = QPushButton("Probe every block")
        self.run_button.setToolTip("A k-fold linear probe on each block's feature (" + FEATURE_NOTE + "), and the "
                                   "logit lens's accuracy at each depth")
        self.cancel_button = QPushButton("Cancel")
        self.progress = QProgressBar()
        self.plot = SmallPlotWidget()
        self.plot.setLabel("bottom", "block")
        self.plot.setLabel("left", "accuracy")
        self.plot.addLegend(offset=(-10, -10))  # bottom right: the curves rise towards the top right
        self.note = QLabel()
        self.note.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.progress, 1)
        box = QVBoxLayout(self)
        box.addLayout(row)
        box.addWidget(self.plot, 1)
        box.addWidget(self.note)
        self.run_button.clicked.connect(model.start)
        self.cancel_button.clicked.connect(self.cancel)
        model.progress.connect(self._on_progress)
        model.changed.connect(self.draw)
        self.draw()

    @property
    def result(self):
        return self.model.result

    def start(self) -> None:
        self.model.start()

    def cancel(self) -> None:
        self.model.cancel()
        self._idle("Cancelled: the features read so far are cached, so the next run starts where this one stopped.")

    def _on_progress(self, p) -> None:
        show_progress(self.progress, self.note, p)

    def _idle(self, text: str | None = None) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)
        self.run_button.setEnabled(self.model.ready())
        self.note.setText(text or ("Open a folder of class folders to probe its layers."
                                   if self.model.folder.folder is None else
                                   "Probe every block: where in the network the folder's classes become readable."))

    def draw(self) -> None:
        self.plot.clear()
        if self.model.running():
            self.run_button.setEnabled(False)
            self.cancel_button.setEnabled(True)
            self.progress.setVisible(True)
            self.progress.setRange(0, 0)
            self.note.setText("Reading every block of the folder…")
            return
        result = self.model.result
        if result is None:
            self._idle(self.model.failure)
            return
        blocks = np.arange(len(result.accuracy))
        self.plot.getAxis("bottom").setTicks([[(int(b), str(b)) for b in blocks]])  # whole blocks, not 0.5 steps
        self.plot.addItem(pg.ErrorBarItem(x=blocks, y=result.accuracy, height=2 * result.spread, beam=0.15))
        self.plot.plot(blocks, result.accuracy, pen=pg.mkPen("#1f77b4", width=2), symbol="o", symbolSize=7,
                       symbolBrush="#1f77b4", name=f"linear probe ({result.folds}-fold, ± 1 s.d.)")
        if result.lens_accuracy is not None:
            self.plot.plot(blocks, result.lens_accuracy, pen=pg.mkPen("#ff7f0e", width=2, style=pg.QtCore.Qt.DashLine),
                           symbol="s", symbolSize=6, symbolBrush="#ff7f0e", name="logit lens")
        self.plot.setYRange(0, 1.02)
        best = int(np.argmax(result.accuracy))
        self._idle(f"{result.images} images, {len(result.classes)} classes: the probe reads {result.accuracy[-1]:.1%} "
                   f"after the last block, best after block {best} ({result.accuracy[best]:.1%}); {result.lens_note}. "
                   f"Features: {FEATURE_NOTE}.")


PAGE = LayersPage
