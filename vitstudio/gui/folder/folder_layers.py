"""The Folder tab's Layers side tab: at which depth does the class become readable? "Probe every block" reads the
opened folder of class folders once (every block's feature, cached per model: `core/folder/layer_cache.py`), fits a
k-fold linear probe per block (`core/train/layer_probes.py`, the quick preset's fitter) and plots the accuracy
against depth with its spread, beside the logit lens's accuracy at each depth. The same figures as
`vitstudio layers FOLDER --model M`."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from vitstudio.app.folder_layers import FEATURE_NOTE, probes_job

from .. import workers
from ..common.job_progress import show_progress
from ..common.small_plot import SmallPlotWidget


class LayersTab(QWidget):
    def __init__(self, panel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.view_state = panel.app.layers_state
        self.jobs = workers.ViewJobs(self.view_state, {"probes": ("folder",)}, long=("probes",))
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
        self.run_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        panel.state.model_loaded.connect(self._on_model)
        panel.view_state.events.paths.connect(self._on_paths)
        self._idle()

    @property
    def result(self):
        """The LayerProbes of the current model and folder, or None."""
        return self.jobs.current("probes")

    def _on_model(self, model) -> None:
        self.view_state.update(model=model.uid)  # the old model's probes go, a pending run is dropped
        self._show()

    def _on_paths(self, _paths) -> None:
        self.view_state.update(folder=self.panel.folder)
        self._show()

    def _idle(self, text: str | None = None) -> None:
        self.progress.setVisible(False)
        self.cancel_button.setEnabled(False)
        model, folder = self.panel.state.model, self.panel.folder
        self.run_button.setEnabled(model is not None and folder is not None)
        self.note.setText(text or ("Open a folder of class folders to probe its layers." if folder is None else
                                   "Probe every block: where in the network the folder's classes become readable."))

    def start(self) -> None:
        model, folder = self.panel.state.model, self.panel.folder
        if model is None or folder is None:
            return
        self.view_state.update(model=model.uid, folder=folder)
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        self.note.setText("Reading every block of the folder…")
        self.jobs.start("probes", "Probing the layers", probes_job, model, folder, on_yield=self._on_progress,
                        on_result=self._on_result, on_error=self._on_error)

    def cancel(self) -> None:
        self.jobs.discard("probes")
        self._idle("Cancelled: the features read so far are cached, so the next run starts where this one stopped.")

    def _on_progress(self, p) -> None:
        show_progress(self.progress, self.note, p)

    def _on_result(self, _result) -> None:
        self._show()

    def _on_error(self, exc: BaseException) -> None:
        self._idle(f"The probes failed: {exc}")
        self.panel.state.report(exc)

    def _show(self) -> None:
        self.plot.clear()
        result = self.result
        if result is None:
            if not self.jobs.running("probes"):
                self._idle()
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
