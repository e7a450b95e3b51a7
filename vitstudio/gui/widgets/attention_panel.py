"""Attention explorer: per-layer head grid, head maps / rollout / gradient rollout / token maps over the image,
and the mean-attention-distance plot (ViT paper Fig. 7 right) for the image or a folder."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QPushButton,
    QSlider,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vitstudio.core.analysis import attention
from vitstudio.core.analysis.explain import distance_over
from vitstudio.core.analysis.registry import FUSIONS

from .. import workers
from .distance_plot import DistancePlotWidget
from .explorer_base import ExplorerPanel, colormap_combo, controls_column, layer_slider, wrapping_label
from .head_grid import HeadGridWidget
from .map_view import MapView

METHODS = ("Head map", "Rollout", "Gradient rollout", "Token map")


def _x(model, entry):
    return model.to_tensor(model.crop(entry.image))[None]


class AttentionPanel(ExplorerPanel):
    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(state, parent)
        self.overview = None  # AttentionOverview of the current image
        self.gradient = None  # (target, GradientRollout)
        self.tokens = None  # (patch, TokenMaps)
        self.patch: tuple[int, int] | None = None
        self.displayed = None  # the (gh, gw) array on screen
        self._jobs = {k: workers.LatestJob() for k in ("overview", "gradient", "tokens")}
        self._jobs["folder"] = workers.LatestJob(workers.LONG)

        self.method = QComboBox()
        self.method.addItems(METHODS)
        self.layer, self.layer_label, layer_row = layer_slider()
        self.head = QSpinBox()
        self.fusion = QComboBox()
        self.fusion.addItems(FUSIONS)
        self.discard = QDoubleSpinBox(decimals=2, minimum=0.0, maximum=0.99, singleStep=0.05)
        self.target = QComboBox()
        self.direction = QComboBox()
        self.direction.addItems(["attends to", "attended by"])
        self.cmap = colormap_combo()
        self.opacity = QSlider(Qt.Horizontal, minimum=0, maximum=100, value=60)
        self.info = wrapping_label()
        form = QFormLayout()
        form.addRow("Method", self.method)
        form.addRow("Layer", layer_row)
        form.addRow("Head", self.head)
        form.addRow("Rollout fusion", self.fusion)
        form.addRow("Discard ratio", self.discard)
        form.addRow("Class", self.target)
        form.addRow("Token map", self.direction)
        form.addRow("Colormap", self.cmap)
        form.addRow("Opacity", self.opacity)
        self.folder_button = QPushButton("Distance over a folder…")
        controls = controls_column(form, self.info, self.folder_button)

        self.view = MapView()
        self.grid = HeadGridWidget()
        self.distance = DistancePlotWidget()
        top = QSplitter(Qt.Horizontal)
        for w in (controls, self.view, self.grid):
            top.addWidget(w)
        top.setStretchFactor(1, 3)
        top.setStretchFactor(2, 2)
        outer = QSplitter(Qt.Vertical)
        outer.addWidget(top)
        outer.addWidget(self.distance)
        outer.setStretchFactor(0, 3)
        outer.setStretchFactor(1, 1)
        QVBoxLayout(self).addWidget(outer)

        for signal in (self.method.currentIndexChanged, self.layer.valueChanged, self.head.valueChanged,
                       self.direction.currentIndexChanged, self.cmap.currentIndexChanged, self.opacity.valueChanged):
            signal.connect(self.refresh_view)
        self.method.currentIndexChanged.connect(self._on_method_changed)
        self.fusion.currentIndexChanged.connect(lambda: self.later(self.reload))
        self.discard.valueChanged.connect(lambda: self.later(self.reload))
        self.target.currentIndexChanged.connect(lambda: self.later(self._ensure_gradient))
        self.view.patch_clicked.connect(self.select_patch)
        self.grid.head_clicked.connect(self._on_head_clicked)
        self.folder_button.clicked.connect(self._choose_folder)
        self.state.model_loaded.connect(self._on_model_loaded)
        self.refresh_view()

    # -- inputs ------------------------------------------------------------------------------------
    def _on_model_loaded(self, model) -> None:
        depth = len(model.model.blocks)
        heads = int(getattr(model.model.blocks[0].attn, "num_heads", 1) or 1)
        self.layer.setRange(0, depth - 1)
        self.layer.setValue(depth - 1)
        self.head.setRange(0, max(0, heads - 1))
        self.target.blockSignals(True)
        self.target.clear()
        self.target.addItem("top-1 prediction", None)
        for i, label in enumerate(model.labels):
            self.target.addItem(f"{i}: {label}", i)
        self.target.blockSignals(False)

    def _on_method_changed(self) -> None:
        method = self.method.currentText()
        if method == "Gradient rollout":
            self._ensure_gradient()
        elif method == "Token map" and self.patch is None:
            self.info.setText("Click a patch on the image to see its token map.")

    def _on_head_clicked(self, head: int) -> None:
        self.head.setValue(head)
        if self.method.currentText() not in ("Head map", "Token map"):
            self.method.setCurrentText("Head map")

    def select_patch(self, row: int, col: int) -> None:
        """A click on the image: show that patch's token map for the current layer and head."""
        self.patch = (row, col)
        if self.method.currentText() != "Token map":
            self.method.setCurrentText("Token map")
        ctx = self.context()
        if ctx is None:
            return
        model, entry = ctx
        patch = self.patch
        self._jobs["tokens"].start(
            "Token maps", lambda cancel: (patch, attention.token_maps(model, _x(model, entry), patch)),
            on_result=self._on_tokens, on_error=self.report_error)
        self.refresh_view()

    # -- jobs --------------------------------------------------------------------------------------
    def reload(self) -> None:
        ctx = self.context()
        self.overview = self.gradient = self.tokens = None
        if ctx is None:
            self.view.set_image(None)
            self.refresh_view()
            return
        model, entry = ctx
        fusion, discard = self.fusion.currentText(), self.discard.value()

        def run(cancel):
            crop = model.crop(entry.image)
            return np.asarray(crop), attention.overview(model, model.to_tensor(crop)[None], fusion, discard)

        self._jobs["overview"].start("Attention", run, on_result=self._on_overview, on_error=self.report_error)
        if self.method.currentText() == "Gradient rollout":
            self._ensure_gradient()
        if self.patch is not None:
            self.select_patch(*self.patch)

    def _ensure_gradient(self) -> None:
        ctx = self.context()
        if ctx is None or self.method.currentText() != "Gradient rollout":
            return
        model, entry = ctx
        target = self.target.currentData()

        def run(cancel):
            return target, attention.gradient_rollout(model, _x(model, entry), target)

        self._jobs["gradient"].start("Gradient rollout", run, on_result=self._on_gradient,
                                     on_error=self.report_error)

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Average attention distance over a folder")
        if folder:
            self.distance_for_folder(folder)

    def distance_for_folder(self, folder: str) -> None:
        model = self.state.model
        if model is None:
            self.report_error("Load a model first.")
            return
        self._jobs["folder"].start("Distance over folder", lambda cancel: distance_over(model, [folder], cancel=cancel),
                                   on_result=self._on_folder_distance, on_error=self.report_error)

    def _on_overview(self, result) -> None:
        crop, overview = result
        self.view.set_image(crop)
        self.overview = overview
        self.distance.set_distance(overview.distance, "this image")
        self.refresh_view()

    def _on_gradient(self, result) -> None:
        self.gradient = result
        self.refresh_view()

    def _on_tokens(self, result) -> None:
        self.tokens = result
        self.refresh_view()

    def _on_folder_distance(self, result) -> None:
        exp, errors = result
        self.distance.set_distance(exp.array, f"folder, {exp.params['images']} images")
        for path, reason in errors:
            self.state.message.emit("warning", f"{path}: {reason}")

    # -- display -----------------------------------------------------------------------------------
    def current_map(self):
        """(array (gh, gw) or None, description) for the current controls, from results already computed."""
        method, layer, head = self.method.currentText(), self.layer.value(), self.head.value()
        ov = self.overview
        if ov is None:
            return None, "Computing attention…" if self.context() else "Load a model and select an image."
        if method == "Head map":
            return ov.head_maps[layer, head], f"CLS attention, layer {layer}, head {head}"
        if method == "Rollout":
            return ov.rollout, f"Attention rollout ({ov.fusion}, discard {ov.discard:.2f})"
        if method == "Gradient rollout":
            if self.gradient is None:
                return None, "Computing gradient rollout…"
            target, result = self.gradient
            cls = result.targets[0]
            return result.maps[0], f"Gradient rollout for class {cls}: {self.state.model.labels[cls]}"
        if self.patch is None or self.tokens is None or self.tokens[0] != self.patch:
            return None, "Click a patch on the image." if self.patch is None else "Computing token maps…"
        maps = self.tokens[1]
        to = self.direction.currentIndex() == 0
        arr = (maps.attends_to if to else maps.attended_by)[0, layer, head]
        return arr, f"Patch {self.patch} {'attends to' if to else 'is attended by'}, layer {layer}, head {head}"

    def refresh_view(self) -> None:
        arr, text = self.current_map()
        self.displayed = arr
        self.info.setText(text)
        self.view.set_map(arr, self.cmap.currentText(), self.opacity.value() / 100)
        self.view.set_marker(self.patch if self.method.currentText() == "Token map" else None)
        if self.overview is not None:
            self.grid.set_maps(self.overview.head_maps[self.layer.value()], self.cmap.currentText(),
                               self.head.value())

    def export_data(self):
        if self.displayed is None:
            return None
        params = {"method": self.method.currentText(), "layer": self.layer.value(), "head": self.head.value(),
                  "fusion": self.fusion.currentText(), "discard": self.discard.value(), "patch": self.patch,
                  "direction": self.direction.currentText(), "description": self.info.text()}
        return "attention", self.displayed, params
