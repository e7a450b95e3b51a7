"""Embedding explorer: PCA → RGB of patch tokens per layer (optionally one fixed basis), similarity to a
clicked patch, token norms, and a 2-D scatter of all tokens."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFormLayout,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.analyses import registry
from vitstudio.app.explore_jobs import no_token_view, token_view_job, tokens_job
from vitstudio.app.model_facts import is_windowed

from ..common.bind import bind
from ..common.map_view import MapView
from ..common.method_combo import method_combo
from ..common.type_map import control_for
from .explorer_base import (
    ExplorerPanel,
    colormap_combo,
    controls_column,
    smooth_checkbox,
    wrapping_label,
)
from .param_form import ParamForm


def _methods() -> tuple[str, ...]:
    return registry.names("embeddings", viewed=True)  # pca, similarity, norms, …


class EmbeddingsPanel(ExplorerPanel):
    explorer_id = "embeddings"

    def __init__(self, app, parent: QWidget | None = None) -> None:
        super().__init__(app, parent)
        self.crop = None
        self.unit = "layer"  # what a token layer is called: Swin's are its stages
        self.basis = None  # the fixed PCA basis, when that option is on
        self.displayed = None

        self.mode = method_combo(_methods())
        self.fixed = control_for(self.view_state.fields()["fixed"], title="Fixed PCA basis")
        self.fixed.setToolTip("Fit the basis once (this layer and image) and reuse it across layers and images")
        self.cmap = colormap_combo(self.view_state)
        self.smooth = smooth_checkbox(self.view_state)
        self.info = wrapping_label()
        self.form = form = QFormLayout()
        form.addRow("View", self.mode)
        self.params = ParamForm(form, self.view_state, _methods())  # the layer, and any a new entry takes
        self.layer, self.layer_label = self.params.controls["layer"], self.params.layer_label
        form.addRow("", self.fixed)
        form.addRow("Colormap", self.cmap)
        form.addRow("", self.smooth)
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

        for name in ("mode", "fixed", "cmap", "smooth"):  # the layer: ParamForm
            bind(getattr(self, name), self.view_state, name)
        events = self.view_state.events
        events.model.connect(self._on_model)  # the unit (layer or stage) changes with the model
        events.mode.connect(self._on_mode)
        events.layer.connect(self._on_layer)
        events.fixed.connect(self._on_fixed)
        events.cmap.connect(self._show)
        events.smooth.connect(self._on_smooth)
        for name in self.params.controls:
            if name != "layer":  # a parameter a new entry brings: its view again, once the control settles
                getattr(events, name).connect(self._on_param)
        self.view.patch_clicked.connect(self.select_patch)
        self._on_mode(self.view_state.mode)

    @property
    def patch(self):
        return self.view_state.patch

    @property
    def tokens(self):
        """(crop, {layer: LayerTokens}) of the current model and image, or None while they are computed."""
        return self.jobs.current("tokens")

    @property
    def result(self):
        """What the view shows, for the current model, image, layer, mode, patch and basis option; else None."""
        return self.jobs.current("view")

    def _layer_name(self) -> str:
        return f"{self.unit} {self.view_state.layer}"

    def _on_model(self, _uid) -> None:
        model = self.state.model  # the explorer set its uid in the model's update
        self.unit = "stage" if model is not None and is_windowed(model.model) else "layer"  # Swin's are its stages
        self.basis = None  # fitted on the previous model's tokens
        self.layer_label.setText(self._layer_name())  # the unit may change with the same layer number

    def _on_layer(self, layer: int) -> None:
        self.layer_label.setText(self._layer_name())
        self.later(self.update_view)

    def _on_mode(self, mode: str) -> None:
        self.params.show_for(mode)
        self.form.setRowVisible(self.fixed, "fixed-basis" in registry.get(mode).options)
        self.update_view()

    def _on_param(self, _value) -> None:
        self.later(self.update_view)

    def _on_smooth(self, on: bool) -> None:
        self.view.smooth = on
        self._show()

    def _on_fixed(self, _fixed: bool) -> None:
        self.basis = None  # refitted on the current layer and image
        self.update_view()

    def select_patch(self, row: int, col: int) -> None:
        vs = self.view_state
        if "patch" in registry.get(vs.mode).param_names:
            vs.update(patch=(row, col))
            self.update_view()
        else:  # to the first view of a patch
            vs.update(patch=(row, col), mode=registry.names("embeddings", viewed=True, param="patch")[0])

    def reload(self) -> None:
        ctx = self.context()
        if ctx is None:
            self.view.set_image(None)
            self._show()
            return
        if self.tokens is not None:
            self.update_view()
            return
        if self.jobs.running("tokens"):
            return
        model, entry = ctx
        self.info.setText("Computing tokens…")
        self.jobs.start("tokens", "Embeddings", tokens_job, model, entry.image, on_result=self._on_tokens,
                        on_error=self.report_error)

    def _on_tokens(self, value) -> None:
        self.crop = value[0]
        self.view.set_image(self.crop)
        self.update_view()

    def update_view(self) -> None:
        tokens = self.tokens
        if tokens is None:
            self._show()
            return
        vs = self.view_state
        basis = self.basis if vs.fixed else None
        params = {name: getattr(vs, name) for name in registry.get(vs.mode).param_names}
        self.jobs.start("view", "Embedding view", token_view_job, tokens[1][vs.layer], vs.mode, params, basis,
                        self.state.model.grid_size, on_result=self._on_view, on_error=self.report_error)

    def _on_view(self, result) -> None:
        if self.view_state.fixed and self.basis is None and result.basis is not None:
            self.basis = result.basis
        self._show()

    def _show(self, *_changed) -> None:
        r = self.result or no_token_view()
        vs = self.view_state
        mode = vs.mode
        self.displayed = r.map
        if self.tokens is None:
            self.info.setText("Load a model and select an image." if self.context() is None else "Computing…")
        elif r.message:
            self.info.setText(r.message)
        elif r.prefix_norms is not None:
            prefix = ", ".join(f"{v:.1f}" for v in r.prefix_norms) or "none"
            self.info.setText(f"Patch-token norms at {self._layer_name()} (prefix tokens: {prefix}). "
                              "Unusually bright cells are high-norm artifact tokens.")
        else:
            self.info.setText(f"{registry.get(mode).title}, {self._layer_name()}"
                              + (", fixed basis" if vs.fixed else ""))
        display = r.display if r.display is not None else self.displayed
        rgb = registry.get(mode).renderer == "rgb"  # colours of their own: drawn opaque
        self.view.set_map(display, vs.cmap, opacity=1.0 if rgb else 0.7)
        self.view.set_marker(self.patch if "patch" in registry.get(mode).param_names else None)
        if r.coords is not None:
            brushes = [pg.mkBrush(*(c * 255).astype(int)) for c in r.colors]
            self.scatter.setData(pos=r.coords, brush=brushes)

    def redraw(self) -> None:
        self._show()

    def export_data(self):
        if self.displayed is None:
            return None
        vs = self.view_state
        params = {name: getattr(vs, name) for name in registry.get(vs.mode).param_names}
        return vs.mode, self.displayed, self.record(vs.mode, params, fixed_basis=vs.fixed)
