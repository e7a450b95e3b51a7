"""Embedding explorer: PCA → RGB of patch tokens per layer (optionally one fixed basis), similarity to a
clicked patch, token norms, and a 2-D scatter of all tokens."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vitstudio.core.analysis import embeddings
from vitstudio.core.analysis.overlays import normalise

from .. import workers
from .explorer_base import ExplorerPanel, colormap_combo, controls_column, layer_slider, wrapping_label
from .map_view import MapView

MODES = ("PCA → RGB", "Similarity to patch", "Token norms")


def compute_view(tokens, mode: str, patch, basis):
    """Runs in a worker: what the panel shows for one layer. Returns a dict of plain arrays."""
    if mode == "PCA → RGB":
        rgb, basis = embeddings.pca_rgb(tokens.patches, basis)
        coords, _ = embeddings.pca_2d(tokens.patches, basis)
        colors = normalise(rgb[0]).reshape(-1, 3)
        return {"map": rgb[0], "display": normalise(rgb[0]), "coords": coords, "colors": colors, "basis": basis}
    if mode == "Similarity to patch":
        if patch is None:
            return {"map": None, "message": "Click a patch on the image."}
        return {"map": embeddings.cosine_similarity_to(tokens.patches, patch)[0]}
    norms, prefix = embeddings.token_norms(tokens)
    return {"map": norms[0], "prefix_norms": prefix[0]}


class EmbeddingsPanel(ExplorerPanel):
    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(state, parent)
        self.tokens = None  # {layer: LayerTokens} of the current image
        self.crop = None
        self.basis = None  # the fixed PCA basis, when that option is on
        self.patch = None
        self.result = None
        self.displayed = None
        self._tokens_job, self._view_job = workers.LatestJob(), workers.LatestJob()

        self.mode = QComboBox()
        self.mode.addItems(MODES)
        self.layer, self.layer_label, layer_row = layer_slider()
        self.fixed = QCheckBox("Fixed PCA basis")
        self.fixed.setToolTip("Fit the basis once (this layer and image) and reuse it across layers and images")
        self.cmap = colormap_combo()
        self.info = wrapping_label()
        form = QFormLayout()
        form.addRow("View", self.mode)
        form.addRow("Layer", layer_row)
        form.addRow("", self.fixed)
        form.addRow("Colormap", self.cmap)
        controls = controls_column(form, self.info)
        self.view = MapView()
        self.scatter_plot = pg.PlotWidget(title="Patch tokens: PC1 vs PC2")
        self.scatter = pg.ScatterPlotItem(size=6, pen=None)
        self.scatter_plot.addItem(self.scatter)
        self.scatter_plot.setMinimumWidth(260)
        split = QSplitter(Qt.Horizontal)
        for w in (controls, self.view, self.scatter_plot):
            split.addWidget(w)
        split.setStretchFactor(1, 3)
        split.setStretchFactor(2, 2)
        QVBoxLayout(self).addWidget(split)

        self.mode.currentIndexChanged.connect(self.update_view)
        self.layer.valueChanged.connect(lambda: self.later(self.update_view))
        self.fixed.toggled.connect(self._on_fixed_toggled)
        self.cmap.currentIndexChanged.connect(self._show)
        self.view.patch_clicked.connect(self.select_patch)
        self.state.model_loaded.connect(self._on_model_loaded)

    def _on_model_loaded(self, model) -> None:
        depth = len(model.model.blocks)
        self.layer.setRange(0, depth - 1)
        self.layer.setValue(depth - 1)
        self.basis = None

    def _on_fixed_toggled(self) -> None:
        self.basis = None  # refitted on the current layer and image
        self.update_view()

    def select_patch(self, row: int, col: int) -> None:
        self.patch = (row, col)
        if self.mode.currentText() != "Similarity to patch":
            self.mode.setCurrentText("Similarity to patch")
        else:
            self.update_view()

    def reload(self) -> None:
        ctx = self.context()
        self.tokens = self.result = None
        if ctx is None:
            self.view.set_image(None)
            self._show()
            return
        model, entry = ctx

        def run(cancel):
            crop = model.crop(entry.image)
            return np.asarray(crop), embeddings.layer_tokens(model, model.to_tensor(crop)[None])

        self.info.setText("Computing tokens…")
        self._tokens_job.start("Embeddings", run, on_result=self._on_tokens, on_error=self.report_error)

    def _on_tokens(self, result) -> None:
        self.crop, self.tokens = result
        self.view.set_image(self.crop)
        self.update_view()

    def update_view(self) -> None:
        if self.tokens is None:
            self._show()
            return
        tokens = self.tokens[self.layer.value()]
        mode, patch = self.mode.currentText(), self.patch
        basis = self.basis if self.fixed.isChecked() else None
        self._view_job.start("Embedding view", lambda cancel: compute_view(tokens, mode, patch, basis),
                             on_result=self._on_view, on_error=self.report_error)

    def _on_view(self, result) -> None:
        self.result = result
        if self.fixed.isChecked() and self.basis is None and "basis" in result:
            self.basis = result["basis"]
        self._show()

    def _show(self) -> None:
        r = self.result or {}
        mode = self.mode.currentText()
        self.displayed = r.get("map")
        if self.tokens is None:
            self.info.setText("Load a model and select an image." if self.context() is None else "Computing…")
        elif r.get("message"):
            self.info.setText(r["message"])
        elif mode == "Token norms" and "prefix_norms" in r:
            prefix = ", ".join(f"{v:.1f}" for v in r["prefix_norms"]) or "none"
            self.info.setText(f"Patch-token norms at layer {self.layer.value()} (prefix tokens: {prefix}). "
                              "Unusually bright cells are high-norm artifact tokens.")
        else:
            self.info.setText(f"{mode}, layer {self.layer.value()}"
                              + (", fixed basis" if self.fixed.isChecked() else ""))
        display = r.get("display", self.displayed)
        self.view.set_map(display, self.cmap.currentText(), opacity=1.0 if mode == "PCA → RGB" else 0.7)
        self.view.set_marker(self.patch if mode == "Similarity to patch" else None)
        if "coords" in r:
            brushes = [pg.mkBrush(*(c * 255).astype(int)) for c in r["colors"]]
            self.scatter.setData(pos=r["coords"], brush=brushes)

    def export_data(self):
        if self.displayed is None:
            return None
        return "embeddings", self.displayed, {"view": self.mode.currentText(), "layer": self.layer.value(),
                                              "patch": self.patch, "fixed_basis": self.fixed.isChecked()}
