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
    QLineEdit,
    QPushButton,
    QSlider,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vitstudio.core.analysis import attention_views, registry
from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.analysis.capture import TokenMaps
from vitstudio.core.analysis.explain import distance_over
from vitstudio.core.fields import COLORMAPS, MASS_MASK, OPACITY, SHOWN_DIRECTIONS

from .. import workers
from ..common.bind import bind
from ..common.map_view import MapView
from ..viewstate import Field
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
from .faithfulness_widget import FaithfulnessWidget, mask_spin_box, masked
from .head_grid import HeadGridWidget

# The shared per-(model, image) overview (every layer's head maps, rollout, distances from one forward): the head
# grid, the distance plot and the entries whose view job it is all read it.
OVERVIEW = "overview"
OVERVIEW_KEYS = ("fusion", "discard")


def _slot(analysis) -> str:
    """The job slot an entry's view reads: the overview's, or its own view job's."""
    job = registry.load(analysis.view_job)
    return OVERVIEW if job is attention_views.overview_job else job.__name__


# -- jobs: module-level, every input passed explicitly (run in workers); the entries' view jobs are in core --------
def _folder_job(cancel, model, folder: str):
    return distance_over(model, [folder], cancel=cancel)


class AttentionPanel(ExplorerPanel):
    FIELDS = dict(method=Field(None, str, valid=registry.is_registered), layer=0, head=0,
                  fusion=registry.get("rollout").param("fusion").spec,
                  discard=registry.get("rollout").param("discard").spec,
                  target=Field(None, int), patch=Field(None, tuple),
                  direction=Field("to", str, choices=SHOWN_DIRECTIONS),
                  cmap=Field("inferno", str, choices=COLORMAPS), opacity=Field(60, int, range=OPACITY), smooth=True,
                  depth=0, head_count=0, folder=Field(None, str),
                  mask=Field(0, int, range=MASS_MASK, help="share of the map's mass kept, %; 0 = off"),
                  text=Field(None, str))  # the text map's text (CLIP-style models)

    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(state, parent)
        self.displayed = None  # the (gh, gw) array on screen
        # the registered attention analyses the panel draws over the image (head maps, rollout, …); the folder
        # analysis (attention distance) has its own plot below
        self.methods = registry.names("attention", viewed=True)
        self.folder_method = registry.names("attention", folder=True)[0]
        self.slots = {m: _slot(registry.get(m)) for m in self.methods}
        keys = {OVERVIEW: OVERVIEW_KEYS, **{self.slots[m]: registry.get(m).view_keys for m in self.methods},
                "folder": ("folder",)}
        self.jobs = workers.ViewJobs(self.view_state, keys, long=("folder",))
        self._job_fields = {k for slot, fields in keys.items() if slot != "folder" for k in fields}
        self.view_state.update(method=self.methods[0])
        self._build_controls()
        self._build_layout()
        self._connect_controls()
        self.view_state.connect(self._on_view_state)
        show_rows_for(self.form, self.rows, self.view_state.method)
        self.refresh_view()

    # -- construction --------------------------------------------------------------------------------
    def _build_controls(self) -> None:
        self.method = method_combo(self.methods)
        self.layer, self.layer_label, self._layer_row = layer_slider()
        self.head = QSpinBox()
        self.fusion = QComboBox()  # choices and ranges: from the fields' specs (bind)
        self.discard = QDoubleSpinBox(decimals=2, singleStep=0.05)
        self.target = QComboBox()
        self.direction = QComboBox()
        self.direction.addItem("attends to", "to")
        self.direction.addItem("attended by", "by")
        self.text = QLineEdit(placeholderText="e.g. a bee (Enter)")
        self.cmap = colormap_combo()
        self.opacity = QSlider(Qt.Horizontal)
        self.mask = mask_spin_box()
        self.smooth = smooth_checkbox()
        self.info = wrapping_label()
        self.form = QFormLayout()
        self.form.addRow("Method", self.method)
        self.rows = {"layer": self._layer_row, "head": self.head, "fusion": self.fusion, "discard": self.discard,
                     "target": self.target, "direction": self.direction, "text": self.text}
        for label, name in (("Layer", "layer"), ("Head", "head"), ("Rollout fusion", "fusion"),
                            ("Discard ratio", "discard"), ("Class", "target"), ("Token map", "direction"),
                            ("Text", "text")):
            self.form.addRow(label, self.rows[name])
        self.form.addRow("Colormap", self.cmap)
        self.form.addRow("Opacity", self.opacity)
        self.form.addRow("Mask", self.mask)
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
        bottom = QSplitter(Qt.Horizontal)  # the distance plot beside the faithfulness of the map on screen
        self.faithfulness = FaithfulnessWidget(self.view_state, self.context, self.report_error)
        for w in (self.distance, self.faithfulness):
            bottom.addWidget(w)
        outer.addWidget(bottom)
        outer.setStretchFactor(0, 3)
        outer.setStretchFactor(1, 1)
        QVBoxLayout(self).addWidget(outer)

    def _connect_controls(self) -> None:
        """Every control is bound to its view-state field; the layer and head ranges follow the model."""
        for name in ("method", "layer", "head", "fusion", "discard", "target", "direction", "cmap", "opacity",
                     "mask", "text", "smooth"):
            bind(getattr(self, name), self.view_state, name)
        events = self.view_state.events
        events.depth.connect(self._show_depth)
        events.head_count.connect(self._show_head_count)
        events.layer.connect(self._show_layer)
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
        no_distance = why_not(model.model, self.folder_method)
        self.folder_button.setEnabled(no_distance is None)
        self.folder_button.setToolTip(no_distance or "Average the attention distance over every image of a folder")
        method = vs.method if self.method.model().item(self.method.findData(vs.method)).isEnabled() else fallback
        return dict(depth=model.depth, head_count=model.num_heads, layer=model.depth - 1, method=method or vs.method,
                    head=min(vs.head, model.num_heads - 1), target=None, patch=vs.patch if same_grid else None)

    def _on_view_state(self, name: str, value) -> None:
        if name in self._job_fields:  # fusion, discard, class, patch: new work, once the control settles
            self.later(self.reload)
        elif name == "method":
            show_rows_for(self.form, self.rows, value)
            self.reload()
        elif name == "smooth":
            self.view.smooth = value
        elif name in ("model", "image"):
            self.distance.show_nothing()  # the previous image's or folder's distances are not this request's
        if name not in ("model", "image"):  # those arrive with a reload
            self.refresh_view()

    def _show_depth(self, depth: int) -> None:
        with QSignalBlocker(self.layer):
            self.layer.setRange(0, max(0, depth - 1))

    def _show_head_count(self, heads: int) -> None:
        with QSignalBlocker(self.head):
            self.head.setRange(0, max(0, heads - 1))

    def _show_layer(self, layer: int) -> None:
        self.layer_label.setText(f"layer {layer}")

    def _on_head_clicked(self, head: int) -> None:
        """A click on a head of the grid: that head, in the current view if it shows one head, else head maps."""
        self.view_state.update(head=head, method=self._method_taking("head"))

    def select_patch(self, row: int, col: int) -> None:
        """A click on the image: show that patch's token map for the current layer and head."""
        self.view_state.update(patch=(row, col), method=self._method_taking("patch"))

    def _method_taking(self, param: str) -> str:
        """The current method if it takes `param`, else the first viewed one that does."""
        method = self.view_state.method
        return method if param in registry.get(method).param_names else \
            registry.names("attention", viewed=True, param=param)[0]

    # -- jobs ----------------------------------------------------------------------------------------
    def reload(self) -> None:
        """Start the overview and the current method's view job, each only if its request has no result yet."""
        ctx = self.context()
        if ctx is None:
            self.view.set_image(None)
            self.refresh_view()
            return
        model, entry = ctx
        self._ensure(OVERVIEW, attention_views.overview_job, OVERVIEW_KEYS, model, entry, self._on_overview)
        analysis = registry.get(self.view_state.method)
        if self._missing(analysis) is None and self.slots[analysis.name] != OVERVIEW:
            self._ensure(self.slots[analysis.name], registry.load(analysis.view_job), analysis.view_keys, model,
                         entry, self._on_map_result, analysis.title)

    def _ensure(self, slot, job, keys, model, entry, on_result, name: str = "Attention") -> None:
        if self.jobs.current(slot) is not None or self.jobs.running(slot):
            return
        self.jobs.start(slot, name, job, model, entry.image, *(getattr(self.view_state, k) for k in keys),
                        on_result=on_result, on_error=self.report_error)

    def _missing(self, analysis) -> str | None:
        """A required parameter the view state does not hold yet (the patch of a token map), or None."""
        return next((k for k in analysis.view_keys if analysis.param(k) is not None and analysis.param(k).required
                     and getattr(self.view_state, k) is None), None)

    def _on_overview(self, value) -> None:
        crop, overview = value
        self.view.set_image(crop)
        if overview is None:
            self.distance.set_unavailable("attention stays inside local windows",
                                          why_not(self.state.model.model, self.folder_method))
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
            self.state.message.emit("warning", "Load a model first.")
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
        value = self.jobs.current(OVERVIEW)
        return value[1] if value is not None else None

    @property
    def gradient(self):
        """The current request's gradient rollout result (the view job of that entry), or None."""
        return self.jobs.current(attention_views.gradient_job.__name__)

    @property
    def tokens(self):
        """The current request's TokenMaps (the view job of token maps), or None."""
        return self.jobs.current(attention_views.token_job.__name__)

    def _params(self) -> dict:
        vs = self.view_state
        return dict(layer=vs.layer, head=vs.head, fusion=vs.fusion, discard=vs.discard, patch=vs.patch,
                    direction=vs.direction, target=vs.target, text=vs.text)

    def current_map(self):
        """(array (gh, gw) or None, description) for the current state, from results already computed: the entry's
        view reads its view job's result."""
        analysis = registry.get(self.view_state.method)
        if self.context() is None:
            return None, "Load a model and select an image."
        missing = self._missing(analysis)
        if missing is not None:
            typed = analysis.param(missing).kind == registry.TEXT_KIND  # a text is typed, a patch is clicked
            return None, "Type a text to look for (e.g. a bee) and press Enter." if typed else \
                f"Click a {missing} on the image."
        value = self.jobs.current(self.slots[analysis.name])
        if value is None:
            return None, "Computing attention…" if self.slots[analysis.name] == OVERVIEW else \
                f"Computing {analysis.title.lower()}…"
        return registry.load(analysis.view)(value, self._params(), self.state.model)

    def refresh_view(self) -> None:
        vs = self.view_state
        arr, text = self.current_map()
        if arr is not None and vs.mask:
            arr, text = masked(arr, vs.mask, text)
        self.displayed = arr
        self.info.setText(text)
        self.view.set_map(arr, vs.cmap, vs.opacity / 100)
        takes_patch = "patch" in registry.get(vs.method).param_names
        self.view.set_marker(vs.patch if takes_patch else None)
        ov = self.overview
        shown = self.jobs.current(self.slots[vs.method])
        if ov is not None:
            self.grid.set_maps(ov.head_maps[vs.layer], vs.cmap, vs.head)
        elif isinstance(shown, TokenMaps) and self.state.model is not None:  # windowed models: the token maps
            maps = shown.attends_to if vs.direction == "to" else shown.attended_by
            maps = maps[0, vs.layer, :self.state.model.heads_at(vs.layer)]
            rows, cols = np.nonzero(np.isfinite(maps).any(0))  # the grid shows the window, not the whole image
            if rows.size:
                maps = maps[:, rows.min():rows.max() + 1, cols.min():cols.max() + 1]
            self.grid.set_maps(maps, vs.cmap, vs.head)

    def export_data(self):
        if self.displayed is None:
            return None
        vs = self.view_state
        targets = getattr(self.jobs.current(self.slots[vs.method]), "targets", None)  # the class explained
        given = dict(self._params(), target=targets[0] if targets else vs.target)
        params = {k: v for k, v in given.items() if k in registry.get(vs.method).param_names}
        return vs.method, self.displayed, self.record(vs.method, params, description=self.info.text())
