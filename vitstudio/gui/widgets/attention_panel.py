"""Attention explorer: per-layer head grid, head maps / rollout / gradient rollout / token maps over the image,
and the mean-attention-distance plot (ViT paper Fig. 7 right) for the image or a folder.

Everything the panel shows follows `view_state`; jobs run through `workers.ViewJobs`, keyed by the fields they
depend on, so moving the layer or head re-indexes results already computed while fusion/discard, class, patch or
folder start new work, and a result is drawn only while its request is current."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSignalBlocker, Qt
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

from vitstudio.core.analysis import attention, registry
from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.analysis.explain import distance_over
from vitstudio.core.models.structure import is_windowed

from .. import workers
from .distance_plot import DistancePlotWidget
from .explorer_base import (
    ExplorerPanel,
    colormap_combo,
    controls_column,
    layer_slider,
    mark_available,
    method_combo,
    show_rows_for,
    smooth_checkbox,
    wrapping_label,
)
from .head_grid import HeadGridWidget
from .map_view import MapView

METHODS = ("heads", "rollout", "gradient-rollout", "token")  # distance has its own plot below
DIRECTIONS = ("to", "by")  # one map at a time on screen
# which view fields each kind of result depends on (besides model and image)
KEYS = {"overview": ("fusion", "discard"), "gradient": ("target",), "tokens": ("patch",), "folder": ("folder",)}


def _x(model, image):
    return model.to_tensor(model.crop(image))[None]


# -- jobs: module-level, every input passed explicitly (run in workers) ---------------------------------------
def _overview_job(cancel, model, image, fusion: str, discard: float):
    crop = model.crop(image)
    if is_windowed(model.model):  # no overview: only token maps apply inside windows
        return np.asarray(crop), None
    return np.asarray(crop), attention.overview(model, model.to_tensor(crop)[None], fusion, discard)


def _gradient_job(cancel, model, image, target):
    return attention.gradient_rollout(model, _x(model, image), target)


def _tokens_job(cancel, model, image, patch):
    return attention.token_maps(model, _x(model, image), patch)


def _folder_job(cancel, model, folder: str):
    return distance_over(model, [folder], cancel=cancel)


class AttentionPanel(ExplorerPanel):
    FIELDS = dict(method="heads", layer=0, head=0, fusion="mean", discard=0.0, target=None, patch=None,
                  direction="to", cmap="inferno", opacity=60, smooth=True, depth=0, heads=0, folder=None)

    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(state, parent)
        self.displayed = None  # the (gh, gw) array on screen
        self.jobs = workers.ViewJobs(self.view_state, KEYS, long=("folder",))
        self._build_controls()
        self._build_layout()
        self._connect_controls()
        self.view_state.connect(self._on_view_state)
        show_rows_for(self.form, self.rows, self.view_state.method)
        self.refresh_view()

    # -- construction --------------------------------------------------------------------------------
    def _build_controls(self) -> None:
        self.method = method_combo(METHODS)
        self.layer, self.layer_label, self._layer_row = layer_slider()
        self.head = QSpinBox()
        self.fusion = QComboBox()
        self.fusion.addItems(registry.FUSIONS)
        lo, hi = registry.get("rollout").param("discard").range
        self.discard = QDoubleSpinBox(decimals=2, minimum=lo, maximum=hi, singleStep=0.05)
        self.target = QComboBox()
        self.direction = QComboBox()
        self.direction.addItem("attends to", "to")
        self.direction.addItem("attended by", "by")
        self.cmap = colormap_combo()
        self.opacity = QSlider(Qt.Horizontal, minimum=0, maximum=100, value=60)
        self.smooth = smooth_checkbox()
        self.info = wrapping_label()
        self.form = QFormLayout()
        self.form.addRow("Method", self.method)
        self.rows = {"layer": self._layer_row, "head": self.head, "fusion": self.fusion, "discard": self.discard,
                     "target": self.target, "direction": self.direction}
        for label, name in (("Layer", "layer"), ("Head", "head"), ("Rollout fusion", "fusion"),
                            ("Discard ratio", "discard"), ("Class", "target"), ("Token map", "direction")):
            self.form.addRow(label, self.rows[name])
        self.form.addRow("Colormap", self.cmap)
        self.form.addRow("Opacity", self.opacity)
        self.form.addRow("", self.smooth)
        self.folder_button = QPushButton("Distance over a folder…")

    def _build_layout(self) -> None:
        controls = controls_column(self.form, self.info, self.folder_button)
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

    def _connect_controls(self) -> None:
        """Widgets write into the view state; `_mirror` writes the state back into them."""
        vs = self.view_state
        self.method.currentIndexChanged.connect(lambda: vs.update(method=self.method.currentData()))
        self.layer.valueChanged.connect(lambda v: vs.update(layer=v))
        self.head.valueChanged.connect(lambda v: vs.update(head=v))
        self.fusion.currentTextChanged.connect(lambda t: vs.update(fusion=t))
        self.discard.valueChanged.connect(lambda v: vs.update(discard=round(v, 2)))
        self.target.currentIndexChanged.connect(lambda: vs.update(target=self.target.currentData()))
        self.direction.currentIndexChanged.connect(lambda: vs.update(direction=self.direction.currentData()))
        self.cmap.currentTextChanged.connect(lambda t: vs.update(cmap=t))
        self.opacity.valueChanged.connect(lambda v: vs.update(opacity=v))
        self.smooth.toggled.connect(lambda on: vs.update(smooth=on))
        self.view.patch_clicked.connect(self.select_patch)
        self.grid.head_clicked.connect(self._on_head_clicked)
        self.folder_button.clicked.connect(self._choose_folder)

    # -- state ---------------------------------------------------------------------------------------
    def fields_for_model(self, model) -> dict:
        self.target.blockSignals(True)
        self.target.clear()
        self.target.addItem("top-1 prediction", None)
        for i, label in enumerate(model.labels):
            self.target.addItem(f"{i}: {label}", i)
        self.target.blockSignals(False)
        vs = self.view_state
        same_grid = vs.model is not None and self.view._grid == tuple(model.grid_size)
        fallback = mark_available(self.method, model)  # e.g. gradient rollout on parallel-attention blocks
        no_distance = why_not(model.model, "distance")
        self.folder_button.setEnabled(no_distance is None)
        self.folder_button.setToolTip(no_distance or "Average the attention distance over every image of a folder")
        method = vs.method if self.method.model().item(self.method.findData(vs.method)).isEnabled() else fallback
        return dict(depth=model.depth, heads=model.num_heads, layer=model.depth - 1, method=method or vs.method,
                    head=min(vs.head, model.num_heads - 1), target=None, patch=vs.patch if same_grid else None)

    def _on_view_state(self, name: str, value) -> None:
        self._mirror(name, value)
        if name in ("fusion", "discard"):
            self.later(self.reload)
        elif name == "target":
            self.later(self._ensure_gradient)
        elif name == "method":
            show_rows_for(self.form, self.rows, value)
            if value == "gradient-rollout":
                self._ensure_gradient()
        elif name == "smooth":
            self.view.smooth = value
        elif name in ("model", "image"):
            self.distance.show_nothing()  # the previous image's or folder's distances are not this request's
        if name not in ("model", "image"):  # those arrive with a reload
            self.refresh_view()

    def _mirror(self, name: str, value) -> None:
        """Show the state in the widgets without feeding it back."""
        if name in ("depth", "heads"):
            widget, top = (self.layer, value - 1) if name == "depth" else (self.head, value - 1)
            with QSignalBlocker(widget):
                widget.setRange(0, max(0, top))
            return
        widget = {"method": self.method, "layer": self.layer, "head": self.head, "fusion": self.fusion,
                  "discard": self.discard, "target": self.target, "direction": self.direction, "cmap": self.cmap,
                  "opacity": self.opacity, "smooth": self.smooth}.get(name)
        if widget is None:
            return
        with QSignalBlocker(widget):
            if isinstance(widget, QComboBox):
                index = 0 if value is None else widget.findData(value)
                widget.setCurrentIndex(index if index >= 0 else widget.findText(str(value)))
            elif widget is self.smooth:
                widget.setChecked(value)
            else:
                widget.setValue(value)
        if widget is self.layer:
            self.layer_label.setText(f"layer {value}")

    def _on_head_clicked(self, head: int) -> None:
        method = self.view_state.method
        self.view_state.update(head=head, method=method if method in ("heads", "token") else "heads")

    def select_patch(self, row: int, col: int) -> None:
        """A click on the image: show that patch's token map for the current layer and head."""
        self.view_state.update(patch=(row, col), method="token")
        self._ensure_tokens()

    # -- jobs ----------------------------------------------------------------------------------------
    def reload(self) -> None:
        ctx = self.context()
        if ctx is None:
            self.view.set_image(None)
            self.refresh_view()
            return
        model, entry = ctx
        vs = self.view_state
        if self.jobs.current("overview") is None and not self.jobs.running("overview"):
            self.jobs.start("overview", "Attention", _overview_job, model, entry.image, vs.fusion, vs.discard,
                            on_result=self._on_overview, on_error=self.report_error)
        if vs.method == "gradient-rollout":
            self._ensure_gradient()
        if vs.patch is not None:
            self._ensure_tokens()

    def _ensure_gradient(self) -> None:
        ctx, vs = self.context(), self.view_state
        if ctx is None or vs.method != "gradient-rollout" or self.gradient is not None \
                or self.jobs.running("gradient"):
            return
        model, entry = ctx
        self.jobs.start("gradient", "Gradient rollout", _gradient_job, model, entry.image, vs.target,
                        on_result=self._on_map_result, on_error=self.report_error)

    def _ensure_tokens(self) -> None:
        ctx, vs = self.context(), self.view_state
        if ctx is None or vs.patch is None or self.tokens is not None or self.jobs.running("tokens"):
            return
        model, entry = ctx
        self.jobs.start("tokens", "Token maps", _tokens_job, model, entry.image, vs.patch,
                        on_result=self._on_map_result, on_error=self.report_error)

    def _on_overview(self, value) -> None:
        crop, overview = value
        self.view.set_image(crop)
        if overview is None:
            self.distance.set_unavailable("attention stays inside local windows",
                                          why_not(self.state.model.model, "distance"))
        else:
            self.distance.set_distance(overview.distance, "this image")
        self.refresh_view()

    def _on_map_result(self, _value) -> None:
        self.refresh_view()

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Average attention distance over a folder")
        if folder:
            self.distance_for_folder(folder)

    def distance_for_folder(self, folder: str) -> None:
        """Average the distance over `folder` for the current model and image (either changing discards it)."""
        model = self.state.model
        if model is None:
            self.report_error("Load a model first.")
            return
        self.view_state.update(folder=folder)
        self.jobs.start("folder", "Distance over folder", _folder_job, model, folder,
                        on_result=self._on_folder_distance, on_error=self.report_error)

    def _on_folder_distance(self, result) -> None:
        exp, errors = result
        self.distance.set_distance(exp.array, f"folder, {exp.params['images']} images")
        for path, reason in errors:
            self.state.message.emit("warning", f"{path}: {reason}")

    # -- display -------------------------------------------------------------------------------------
    @property
    def overview(self):
        """The current image's AttentionOverview, or None while it is being computed."""
        value = self.jobs.current("overview")
        return value[1] if value is not None else None

    @property
    def gradient(self):
        return self.jobs.current("gradient")

    @property
    def tokens(self):
        return self.jobs.current("tokens")

    def current_map(self):
        """(array (gh, gw) or None, description) for the current state, from results already computed."""
        vs = self.view_state
        method, layer, head = vs.method, vs.layer, vs.head
        ov, model = self.overview, self.state.model
        if self.context() is None:
            return None, "Load a model and select an image."
        if method == "token":
            return self._token_map(layer, head)
        if ov is None:
            return None, "Computing attention…"
        if method == "heads":
            return ov.head_maps[layer, head], f"{attention.head_map_title(model, layer)}, layer {layer}, head {head}"
        if method == "rollout":
            return ov.rollout, f"Attention rollout ({ov.fusion}, discard {ov.discard:.2f})"
        if method == "gradient-rollout":
            if self.gradient is None:
                return None, "Computing gradient rollout…"
            cls = self.gradient.targets[0]
            return self.gradient.maps[0], f"Gradient rollout for class {cls}: {model.labels[cls]}"
        return None, ""

    def _token_map(self, layer: int, head: int):
        vs, model = self.view_state, self.state.model
        if vs.patch is None or self.tokens is None:
            return None, "Click a patch on the image." if vs.patch is None else "Computing token maps…"
        heads = model.heads_at(layer)
        if head >= heads:  # Swin's early stages have fewer heads than its last
            return None, f"Layer {layer} has {heads} head{'s' if heads > 1 else ''} (0..{heads - 1}); pick one of them."
        to = vs.direction == "to"
        arr = (self.tokens.attends_to if to else self.tokens.attended_by)[0, layer, head]
        text = f"Patch {vs.patch} {'attends to' if to else 'is attended by'}, layer {layer}, head {head}"
        if is_windowed(model.model):
            text += " — inside its window only (Swin attends within local windows; the rest has no attention)"
        return arr, text

    def refresh_view(self) -> None:
        vs = self.view_state
        arr, text = self.current_map()
        self.displayed = arr
        self.info.setText(text)
        self.view.set_map(arr, vs.cmap, vs.opacity / 100)
        self.view.set_marker(vs.patch if vs.method == "token" else None)
        ov = self.overview
        if ov is not None:
            self.grid.set_maps(ov.head_maps[vs.layer], vs.cmap, vs.head)
        elif self.tokens is not None and vs.method == "token" and self.state.model is not None:  # windowed models
            maps = self.tokens.attends_to if vs.direction == "to" else self.tokens.attended_by
            maps = maps[0, vs.layer, :self.state.model.heads_at(vs.layer)]
            rows, cols = np.nonzero(np.isfinite(maps).any(0))  # the grid shows the window, not the whole image
            if rows.size:
                maps = maps[:, rows.min():rows.max() + 1, cols.min():cols.max() + 1]
            self.grid.set_maps(maps, vs.cmap, vs.head)

    def export_data(self):
        if self.displayed is None:
            return None
        vs = self.view_state
        given = dict(layer=vs.layer, head=vs.head, fusion=vs.fusion, discard=vs.discard, patch=vs.patch,
                     direction=vs.direction, target=self.gradient.targets[0] if self.gradient else vs.target)
        params = {k: v for k, v in given.items() if k in registry.get(vs.method).param_names}
        return vs.method, self.displayed, self.record(vs.method, params, description=self.info.text())
