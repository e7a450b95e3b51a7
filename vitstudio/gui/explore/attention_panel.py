"""Attention explorer: per-layer head grid, head maps / rollout / gradient rollout / token maps over the image,
and the mean-attention-distance plot (ViT paper Fig. 7 right) for the image or a folder.

Everything the panel shows follows `view_state`; jobs run through `workers.ViewJobs`, keyed by the fields they
depend on, so moving the layer or head re-indexes results already computed while fusion/discard, class, patch or
folder start new work, and a result is drawn only while its request is current."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.analyses import MaskExport, registry, why_not
from vitstudio.app.explore_jobs import (
    OVERVIEW,
    entry_job,
    entry_view,
    folder_distance_job,
    is_token_maps,
    job_keys,
    overview_job,
    register_choice,
    registered_job,
)
from vitstudio.app.explore_states import registry_fields
from vitstudio.app.model_facts import has_class_token
from vitstudio.app.notices import describe
from vitstudio.gui import file_dialogs

from ..common.bind import bind
from ..common.map_view import MapView
from ..common.method_combo import mark_available, method_combo
from ..common.type_map import control_for
from .distance_plot import DistancePlotWidget
from .explorer_base import (
    ExplorerPanel,
    colormap_combo,
    controls_column,
    smooth_checkbox,
    wrapping_label,
)
from .faithfulness_widget import FaithfulnessWidget, mask_spin_box, masked
from .head_grid import HeadGridWidget
from .paint_segmentation import PaintSegmentationWidget
from .param_form import ParamForm


class AttentionPanel(ExplorerPanel):
    explorer_id = "attention"

    def __init__(self, app, parent: QWidget | None = None) -> None:
        super().__init__(app, parent)
        self.displayed = None  # the (gh, gw) array on screen
        self.methods = self.explorer.methods  # the registered analyses drawn over the image (head maps, rollout, …)
        self.param_names = tuple(registry_fields(self.methods, {}))  # every parameter of them, read once
        self.folder_method = registry.names("attention", folder=True)[0]  # the distance plot's, below
        self.slots = self.explorer.method_slots
        keys = self.jobs.keys
        self._job_fields = {k for slot, fields in keys.items() if slot != "folder" for k in fields}
        self._build_controls()
        self._build_layout()
        self._connect_controls()
        self.view_state.connect(self._on_view_state)
        self.state.model_loaded.connect(self._on_model_loaded)  # after the explorer's update (it connected first)
        self.params.show_for(self.view_state.method)
        self.refresh_view()

    # -- construction --------------------------------------------------------------------------------
    def _build_controls(self) -> None:
        self.method = method_combo(self.methods)
        self.cmap = colormap_combo(self.view_state)
        self.opacity = control_for(self.view_state.fields()["opacity"], widget="slider")
        self.mask = mask_spin_box(self.view_state.fields()["mask"])
        self.smooth = smooth_checkbox(self.view_state)
        self.with_register = control_for(self.view_state.fields()["with_register"], title="Register token")
        self.with_register.setToolTip("With a test-time register: every map computed on the model with one extra "
                                      "token that the register neurons found on the Folder tab's Registers page write "
                                      "to instead of the patches (Jiang et al. 2025)")
        self.info = wrapping_label()
        self.form = QFormLayout()
        self.form.addRow("Method", self.method)
        # one row per parameter of the methods, from the registry, bound to its view field
        self.params = ParamForm(self.form, self.view_state, self.methods)
        controls = self.params.controls
        self.layer, self.head, self.target = controls["layer"], controls["head"], controls["target"]
        self.fusion, self.discard = controls["fusion"], controls["discard"]
        self.direction, self.text = controls["direction"], controls["text"]
        self.layer_label = self.params.layer_label
        self.form.addRow("Colormap", self.cmap)
        self.form.addRow("Opacity", self.opacity)
        self.form.addRow("Mask", self.mask)
        toggles = QHBoxLayout()  # one row: the tab's height at 1280×720 is spent
        toggles.setContentsMargins(0, 0, 0, 0)
        toggles.addWidget(self.smooth)
        toggles.addWidget(self.with_register)
        toggles.addStretch(1)
        self.form.addRow("", toggles)
        self.folder_button = QPushButton("Distance over a folder…")
        self.mask_button = QPushButton("Export mask (PNG + COCO)…")  # what `explain --mask` writes
        self.mask_button.setToolTip("The mask on screen as a PNG at the size the model saw, and its COCO RLE")

    def _build_layout(self) -> None:
        self.view = MapView()
        self.paint_segmentation = PaintSegmentationWidget(self.view)  # the Paint page's classes over the image
        controls = controls_column(self.form, self.info, self.mask_button, self.folder_button,
                                   self.paint_segmentation)
        self.params.fix_width(controls, self.methods)
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
        """Every control is bound to its view-state field (the layer and head ranges and the classes with it)."""
        for name in ("method", "cmap", "opacity", "mask", "smooth", "with_register"):  # parameters: ParamForm
            bind(getattr(self, name), self.view_state, name)
        self.register_page = self.app.pages.get("register-neurons")
        if self.register_page is not None:
            self.register_page.changed.connect(self._choose_registers)
        self.view_state.events.with_register.connect(self._choose_registers)
        self._choose_registers()
        events = self.view_state.events
        events.layer.connect(self._show_layer)
        self.view.patch_clicked.connect(self.select_patch)
        self.grid.head_clicked.connect(self._on_head_clicked)
        self.folder_button.clicked.connect(self._choose_folder)
        self.mask_button.clicked.connect(lambda: self.export_mask())

    # -- state ---------------------------------------------------------------------------------------
    def _on_model_loaded(self, model) -> None:
        """What the explorer's new model changes on screen: the analyses that do not apply greyed out, with why."""
        mark_available(self.method, model)  # e.g. gradient rollout on parallel-attention blocks
        no_distance = why_not(model.model, self.folder_method)
        self.folder_button.setEnabled(no_distance is None)
        self.folder_button.setToolTip(no_distance or "Average the attention distance over every image of a folder")

    def _on_view_state(self, name: str, value) -> None:
        if name in self._job_fields:  # fusion, discard, class, patch: new work, once the control settles
            self.later(self.reload)
        elif name == "method":
            self.params.show_for(value)
            self.reload()
        elif name == "smooth":
            self.view.smooth = value
        elif name in ("model", "image"):
            self.distance.show_nothing()  # the previous image's or folder's distances are not this request's
        if name not in ("model", "image"):  # those arrive with a reload
            self.refresh_view()

    def _choose_registers(self, *_value) -> None:
        """The neurons the maps take a register on follow the toggle and the Registers page's result."""
        found = register_choice(True, self.register_page)
        self.with_register.setEnabled(found is not None or self.view_state.with_register)  # on, it can go off
        registers = found if self.view_state.with_register else None
        if registers is not self.view_state.registers:
            self.view_state.update(registers=registers)

    def _show_layer(self, layer: int) -> None:
        self.layer_label.setText(f"layer {layer}")

    def _on_head_clicked(self, head: int) -> None:
        """A click on a head of the grid: that head, in the current view if it shows one head, else head maps."""
        self.view_state.update(head=head, method=self._method_taking("head"))

    def select_patch(self, row: int, col: int) -> None:
        """A click on the image: show that patch's token map for the current layer and head (said when it leaves the
        method shown: the switch went unexplained)."""
        method, shown = self._method_taking("patch"), self.view_state.method
        if method != shown:
            self.state.message.emit("info", f"A click picks a patch: its {registry.get(method).title} is shown (the "
                                            f"Method box goes back to {registry.get(shown).title}).")
        self.view_state.update(patch=(row, col), method=method)

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
        self._ensure(OVERVIEW, overview_job, registry.OVERVIEW_KEYS, model, entry, self._on_overview)
        analysis = registry.get(self.view_state.method)
        if self._missing(analysis) is None and self.slots[analysis.name] != OVERVIEW:
            own = analysis.view_job is not None  # else: explained once per request (compute only)
            self._ensure(self.slots[analysis.name], registry.load(analysis.view_job) if own else entry_job,
                         job_keys(analysis), model, entry, self._on_map_result, analysis.title,
                         () if own else (analysis.name,))

    def _ensure(self, slot, job, keys, model, entry, on_result, name: str = "Attention", before=()) -> None:
        if self.jobs.current(slot) is not None or self.jobs.running(slot) or self.jobs.failed(slot) is not None:
            return
        inputs = (model, entry.image, *before, *(getattr(self.view_state, k) for k in keys))
        registers = self.view_state.registers
        if registers is not None:  # the same job, on the model with the test-time register
            job, inputs = registered_job, (registers, job, *inputs)
        self.jobs.start(slot, name, job, *inputs, on_result=on_result, on_error=self._on_job_failed)

    def _on_job_failed(self, exc: BaseException) -> None:
        self.report_error(exc)
        self.refresh_view()  # the reason replaces "Computing…"

    def _missing(self, analysis) -> str | None:
        """A required parameter the view state does not hold yet (the patch of a token map), or None."""
        return next((k for k in job_keys(analysis) if analysis.param(k) is not None and analysis.param(k).required
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
        folder = file_dialogs.choose_folder(self, "Average attention distance over a folder")
        if folder:
            self.distance_for_folder(folder)

    def distance_for_folder(self, folder: str) -> None:
        """Average the distance over `folder` for the current model and image (either changing discards it)."""
        model = self.state.model
        if model is None:
            self.state.message.emit("warning", "Load a model first.")
            return
        self.view_state.update(folder=folder)
        self.jobs.start("folder", "Distance over folder", folder_distance_job, model, self.folder_method, folder,
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
    def tokens(self):
        """The current request's TokenMaps (the view job of token maps), or None."""
        return self.jobs.current(self.slots["token"])

    def _params(self) -> dict:
        """The view's value of every parameter its methods take."""
        return {name: getattr(self.view_state, name) for name in self.param_names}

    def current_map(self):
        """(array (gh, gw) or None, description) for the current state, from results already computed: the entry's
        view reads its view job's result."""
        analysis = registry.get(self.view_state.method)
        if self.context() is None:
            return None, "Load a model and select an image."
        missing = self._missing(analysis)
        if missing is not None:
            kind = analysis.param(missing).kind  # a text is typed, a file chosen, a patch clicked
            return None, {registry.TEXT_KIND: "Type a text to look for (e.g. a bee) and press Enter.",
                          registry.FILE_KIND: "Learn concepts or open a concepts file in the Concepts tab."}.get(
                kind, f"Click a {missing} on the image.")
        value = self.jobs.current(self.slots[analysis.name])
        failed = self.jobs.failed(self.slots[analysis.name])
        if failed is not None:  # said once (the log, the status bar); here until the request changes
            return None, f"Could not compute {analysis.title.lower()}: {describe(failed)}"
        if value is None:
            return None, "Computing attention…" if self.slots[analysis.name] == OVERVIEW else \
                f"Computing {analysis.title.lower()}…"
        view = registry.load(analysis.view) if analysis.view is not None else entry_view
        return view(value, self._params(), self.state.model)

    def refresh_view(self) -> None:
        vs = self.view_state
        arr, text = self.current_map()
        if arr is not None and vs.mask:
            arr, text = masked(arr, vs.mask, text)
        self.displayed = arr
        self.mask_button.setEnabled(bool(vs.mask) and arr is not None and arr.ndim == 2)
        if arr is not None and vs.registers is not None:
            text += f", with a test-time register on {len(vs.registers.neurons)} neurons"
        self.info.setText(text)
        self.view.set_map(arr, vs.cmap, vs.opacity / 100)
        takes_patch = "patch" in registry.get(vs.method).param_names
        self.view.set_marker(vs.patch if takes_patch else None)
        ov = self.overview
        shown = self.jobs.current(self.slots[vs.method])
        if ov is not None:
            seen = "CLS attention" if has_class_token(self.state.model.model) else "attention received"
            self.grid.set_maps(ov.head_maps[vs.layer], vs.cmap, vs.head, f"Layer {vs.layer}: each head's {seen}")
        elif is_token_maps(shown) and self.state.model is not None:  # windowed models: the token maps
            maps = shown.attends_to if vs.direction == "to" else shown.attended_by
            maps = maps[0, vs.layer, :self.state.model.heads_at(vs.layer)]
            rows, cols = np.nonzero(np.isfinite(maps).any(0))  # the grid shows the window, not the whole image
            if rows.size:
                maps = maps[:, rows.min():rows.max() + 1, cols.min():cols.max() + 1]
            self.grid.set_maps(maps, vs.cmap, vs.head, f"Layer {vs.layer}: each head, the patch's window")

    def export_mask(self, folder: str | None = None) -> list | None:
        """The mask on screen into `folder`: <image>.<method>.mask.png and <method>.masks.json (COCO, RLE)."""
        values, _ = self.current_map()
        entry = self.state.selected
        if values is None or not self.view_state.mask or entry is None:
            return None
        folder = folder or file_dialogs.choose_folder(self, "Export the mask into which folder?", create=True)
        if not folder:
            return None
        export = MaskExport(Path(folder), self.view_state.method, self.view_state.mask / 100)
        model, hw = self.state.model, (entry.image.height, entry.image.width)  # the image's size, not the crop's
        placed = (hw, model.crop_box(hw))
        written = [*export.add(values, model.input_hw, Path(entry.path).name, placed), export.finish()]
        self.state.message.emit("info", "Saved " + ", ".join(str(p) for p in written))
        return written

    def redraw(self) -> None:
        self.refresh_view()

    def export_data(self):
        if self.displayed is None:
            return None
        vs = self.view_state
        targets = getattr(self.jobs.current(self.slots[vs.method]), "targets", None)  # the class explained
        given = dict(self._params(), target=targets[0] if targets else vs.target)
        params = {k: v for k, v in given.items() if k in registry.get(vs.method).param_names}
        return vs.method, self.displayed, self.record(vs.method, params, description=self.info.text())
