"""The Compare tab's Layers page: CKA between every block of the current model and every block of the second one
on the images in the strip (`core/folder/layer_compare.py`: linear CKA of each block's prefix token, the mean token
for models without one). Hover a cell for its value; click it to see both blocks' PCA maps of the selected image
side by side. A run's base model is offered as the second model ("before vs after fine-tuning"). The same matrix as
`vitstudio compare-layers IMAGES --model A --model B`."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.explore_jobs import cka_job, pca_pair_job
from vitstudio.core.files import counted

from .. import workers
from ..common.job_progress import show_progress
from ..common.map_view import MapView, colour_map
from ..common.small_plot import SmallPlotWidget

MIN_IMAGES = 4  # the fewest images CKA is computed on (the minibatch estimator's n > 3)


class LayerCKAWidget(QWidget):
    def __init__(self, panel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.view_state = panel.app.layer_cka_state
        self.jobs = workers.ViewJobs(self.view_state, {"cka": ("other", "paths"),
                                                       "pair": ("other", "paths", "cell", "image")}, long=("cka",))
        self.run_button = QPushButton("CKA of every block")
        self.cancel_button = QPushButton("Cancel")
        self.progress = QProgressBar()
        self.plot = SmallPlotWidget()
        self.heat = pg.ImageItem(axisOrder="row-major")
        self.heat.setLookupTable(colour_map("magma").getLookupTable(nPts=256))
        self.plot.addItem(self.heat)
        self.plot.setAspectLocked(True)
        self.plot.invertY(True)
        self.plot.setMouseEnabled(False, False)  # a few blocks: nothing to pan or zoom
        bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=colour_map("magma"), interactive=False, width=12)
        bar.setImageItem(self.heat, insert_in=self.plot.getPlotItem())
        self.plot.setLabel("left", "block of the current model")
        self.plot.setLabel("bottom", "block of the second model")
        for side in ("left", "bottom"):  # block numbers: never "(x0.001)" over an empty plot's −600…600
            self.plot.getAxis(side).enableAutoSIPrefix(False)
        self.plot.setRange(xRange=(0, 1), yRange=(0, 1), padding=0)
        self.hover = QLabel()
        self.hover.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.maps = [MapView(), MapView()]
        self.map_titles = [QLabel(), QLabel()]
        for view, title in zip(self.maps, self.map_titles):
            view.setMinimumSize(160, 160)  # beside the heat map, not over it
            view.setMaximumSize(220, 220)
            title.setWordWrap(True)
            title.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # a long model name never widens the tab
        row = QHBoxLayout()
        for w, stretch in ((self.run_button, 0), (self.cancel_button, 0), (self.progress, 1), (self.hover, 1)):
            row.addWidget(w, stretch)
        pair = QGridLayout()
        for i in range(2):
            pair.addWidget(self.map_titles[i], 0, i)
            pair.addWidget(self.maps[i], 1, i)
        pair.setRowStretch(2, 1)
        body = QHBoxLayout()
        body.addWidget(self.plot, 3)
        body.addLayout(pair, 2)
        box = QVBoxLayout(self)
        box.addLayout(row)
        box.addWidget(self.note)  # under the button it explains: below the plot it was out of sight at 1280×720
        box.addLayout(body, 1)
        self.run_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.plot.scene().sigMouseMoved.connect(self._on_mouse)
        self.plot.scene().sigMouseClicked.connect(self._on_click)
        panel.state.images_added.connect(self._on_strip)
        panel.state.images_removed.connect(self._on_strip)
        self.refresh()

    # -- what it is computed for -------------------------------------------------------------------------------
    def strip_paths(self) -> list[str]:
        return [e.path for e in self.panel.state.images if e.error is None and e.path]

    @property
    def result(self):
        return self.jobs.current("cka")

    def _on_strip(self, _entries) -> None:
        self._enable()

    def refresh(self) -> None:
        """Follow the current model, the second one and the selected image (called by the Compare panel)."""
        model, other, entry = self.panel.state.model, self.panel.other, self.panel.state.selected
        self.view_state.update(model=model.uid if model else None, other=other.uid if other else None,
                               image=entry.uid if entry is not None else None)
        self._show()

    def _enable(self, text: str | None = None) -> None:
        running = self.jobs.running("cka")
        n = len(self.strip_paths())
        ready = self.panel.state.model is not None and self.panel.other is not None and n >= MIN_IMAGES
        self.run_button.setEnabled(ready and not running)
        self.run_button.setText(f"CKA of every block on the {counted(n, 'image')} in the strip")
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        if text is None and not running:
            text = ("Load a second model above, then compare every block of the two." if self.panel.other is None
                    else f"Open at least {MIN_IMAGES} images (a folder) to compare the layers on." if n < MIN_IMAGES
                    else "CKA of each block's class token (the mean token without one) on the strip's images.")
        if text is not None:
            self.note.setText(text)
        self.run_button.setToolTip("" if self.run_button.isEnabled() else self.note.text())  # why it is greyed

    def start(self) -> None:
        model, other, paths = self.panel.state.model, self.panel.other, self.strip_paths()
        if model is None or other is None or len(paths) < MIN_IMAGES:
            return
        self.view_state.update(paths=tuple(paths), cell=None)
        self.jobs.start("cka", "CKA between layers", cka_job, model, other, paths, on_yield=self._on_progress,
                        on_result=self._on_result, on_error=self._on_error)
        self.progress.setRange(0, 0)
        self._enable("Reading every block of both models…")

    def cancel(self) -> None:
        self.jobs.discard("cka")
        self._enable("Cancelled: the blocks read so far are cached, so the next run starts where this one stopped.")

    def _on_progress(self, p) -> None:
        show_progress(self.progress, self.note, p)

    def _on_result(self, _result) -> None:
        self._show()

    def _on_error(self, exc: BaseException) -> None:
        self._enable(f"CKA failed: {exc}")
        self.panel.report_error(exc)

    # -- drawing -----------------------------------------------------------------------------------------------
    def _show(self) -> None:
        result = self.result
        if result is None:
            self.heat.clear()
            self.hover.clear()
            self._show_pair()
            self._enable()
            return
        self.heat.setImage(result.matrix.astype(np.float32), levels=(0.0, 1.0))
        self.heat.setRect(-0.5, -0.5, result.matrix.shape[1], result.matrix.shape[0])
        for axis, count in (("left", result.matrix.shape[0]), ("bottom", result.matrix.shape[1])):
            self.plot.getAxis(axis).setTicks([[(i, str(i)) for i in range(count)]])
        self.plot.setRange(xRange=(-0.5, result.matrix.shape[1] - 0.5), yRange=(-0.5, result.matrix.shape[0] - 0.5),
                           padding=0.02)
        diagonal = np.diag(result.matrix) if result.matrix.shape[0] == result.matrix.shape[1] else None
        same = "" if diagonal is None else f"; along the diagonal {diagonal.min():.3f} … {diagonal.max():.3f}"
        self._enable(f"Linear CKA on {counted(result.images, 'image')} (rows: {result.names[0]}, columns: "
                     f"{result.names[1]}){same}. Click a cell for both blocks' PCA maps of the selected image.")
        self._show_pair()

    def cell_at(self, scene_pos) -> tuple[int, int] | None:
        result = self.result
        if result is None:
            return None
        point = self.plot.getViewBox().mapSceneToView(scene_pos)
        row, col = int(np.floor(point.y() + 0.5)), int(np.floor(point.x() + 0.5))
        rows, cols = result.matrix.shape
        return (row, col) if 0 <= row < rows and 0 <= col < cols else None

    def _on_mouse(self, pos) -> None:
        cell = self.cell_at(pos)
        self.hover.setText("" if cell is None else
                           f"block {cell[0]} × block {cell[1]}: CKA {self.result.matrix[cell]:.3f}")

    def _on_click(self, event) -> None:
        cell = self.cell_at(event.scenePos())
        if cell is not None:
            self.select_cell(*cell)

    def select_cell(self, row: int, col: int) -> None:
        """Both blocks' PCA maps of the selected image, computed in a worker."""
        entry = self.panel.state.selected
        self.view_state.update(cell=(row, col))
        if entry is None or entry.image is None or self.panel.other is None:
            self._show_pair()
            return
        self.jobs.start("pair", "PCA of two blocks", pca_pair_job, self.panel.state.model, self.panel.other,
                        entry.image, (row, col), on_result=self._on_pair, on_error=self.panel.report_error)

    def _on_pair(self, _pair) -> None:
        self._show_pair()

    def _show_pair(self) -> None:
        pair, cell = self.jobs.current("pair"), self.view_state.cell
        for i, view in enumerate(self.maps):
            if pair is None:
                view.set_map(None)
                self.map_titles[i].setText("")
                continue
            crop, colours = pair[i]
            view.set_image(crop)
            view.set_map(colours, "inferno", 1.0)
            name = (self.panel.state.model, self.panel.other)[i].display_name
            self.map_titles[i].setText(f"{name}: block {cell[i]}, PCA → RGB")
            self.map_titles[i].setAlignment(Qt.AlignCenter)
