"""Compare two models side by side on the same image (e.g. before / after fine-tuning), same view and colour scale."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.analyses import registry, why_not
from vitstudio.app.explore_jobs import compare_job, load_second_model, shared_classes, with_shared_classes
from vitstudio.app.model_facts import is_clip_style, prompt_of
from vitstudio.app.model_files import base_model, local_folder

from ..common.bind import bind
from ..common.map_view import MapView
from ..common.method_combo import mark_available, method_combo
from ..common.model_marks import MODEL_LIST_WIDTH
from .explorer_base import ExplorerPanel, colormap_combo, smooth_checkbox
from .layer_cka import LayerCKAWidget
from .match_page import MatchPage


class ComparePanel(ExplorerPanel):
    explorer_id = "compare"

    def __init__(self, app, catalog_names: list[str], parent: QWidget | None = None) -> None:
        super().__init__(app, parent)
        self.other = None  # the second LoadedModel
        model_row = self._second_model_row(catalog_names)
        self.view_kind = method_combo(registry.names(compare=True))
        self.cmap = colormap_combo(self.view_state)
        self.smooth = smooth_checkbox(self.view_state)
        top = QHBoxLayout()
        top.addWidget(QLabel("View"))
        top.addWidget(self.view_kind)
        top.addWidget(QLabel("Colormap"))
        top.addWidget(self.cmap)
        top.addWidget(self.smooth)
        top.addStretch(1)
        self.titles = [QLabel("Current model"), QLabel("Second model: not loaded")]
        self.views = [MapView(), MapView()]
        grid = QGridLayout()
        for i in range(2):  # two equal halves: a long title wraps in its own, it never widens its map
            self.titles[i].setAlignment(Qt.AlignCenter)
            self.titles[i].setWordWrap(True)
            for widget in (self.titles[i], self.views[i]):
                widget.setSizePolicy(QSizePolicy.Ignored, widget.sizePolicy().verticalPolicy())
            grid.addWidget(self.titles[i], 0, i)
            grid.addWidget(self.views[i], 1, i)
            grid.setColumnStretch(i, 1)
        self.info = QLabel("Both maps share one colour scale, so their intensities compare directly.")
        same_image = QWidget()
        page = QVBoxLayout(same_image)
        page.addLayout(top)  # the view's controls are this page's: the Layers and Match pages have their own
        page.addLayout(grid, 1)
        page.addWidget(self.info)
        self.layers = LayerCKAWidget(self)  # CKA between the two models' blocks
        self.pages = QTabWidget()
        self.pages.addTab(same_image, "Same image")
        self.pages.addTab(self.layers, "Layers (CKA)")
        self.match = MatchPage(self)  # a point of one image found in another
        self.pages.addTab(self.match, "Match")
        layout = QVBoxLayout(self)
        layout.addLayout(model_row)
        layout.addWidget(self.pages, 1)
        self.load_button.clicked.connect(self.load_other)
        self.other_name.lineEdit().returnPressed.connect(self._on_return)  # a name typed (listed or not)
        self.other_name.activated.connect(self._on_picked)  # a model chosen from the list loads, as in the model bar
        for widget, name in ((self.view_kind, "method"), (self.cmap, "cmap"), (self.smooth, "smooth")):
            bind(widget, self.view_state, name)
        events = self.view_state.events
        events.other.connect(self._on_context_changed)
        events.method.connect(self._on_context_changed)
        events.cmap.connect(self._show)
        events.smooth.connect(self._on_smooth)
        self.state.model_loaded.connect(self._on_model_loaded)  # after the explorer's update (it connected first)

    def _second_model_row(self, catalog_names: list[str]) -> QHBoxLayout:
        """The second model's box and Load, a row of their own: at 1280×720 a long name is read whole (beside the
        view's controls the box had ~170 px of text)."""
        self.other_name = QComboBox(editable=True)
        self.other_name.addItems(catalog_names)
        self.other_name.setEditText("")
        self.other_name.lineEdit().setPlaceholderText("second model: name, folder under models/, or hf-hub:…")
        # a catalog name can be 60 characters: the box must not set the tab's (and the window's) minimum width
        self.other_name.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.other_name.setMinimumContentsLength(18)
        self.other_name.view().setMinimumWidth(MODEL_LIST_WIDTH)  # the open list shows whole names
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip("Load the second model named (again, if it is the one compared)")
        row = QHBoxLayout()
        row.addWidget(QLabel("Second model"))
        row.addWidget(self.other_name, 1)
        row.addWidget(self.load_button)
        return row

    def _on_picked(self, index: int) -> None:
        self._ask(self.other_name.itemText(index))

    def _on_return(self) -> None:
        self._ask(self.other_name.currentText().strip())

    def _ask(self, spec: str) -> None:
        """Load `spec` unless it is the second model loading or compared (Return on a listed name arrives as
        returnPressed and as activated; picking the model compared changes nothing); Load always loads again."""
        asked = self.view_state.other_request
        if asked is not None and asked[0] == spec and (
                self.jobs.running("load") or (self.other is not None and self.jobs.failed("load") is None)):
            return
        self.load_other()

    def load_other(self) -> None:
        spec = self.other_name.currentText().strip()
        if not spec:
            return
        main = self.state.model
        device = str(main.device) if main else "auto"
        precision = main.precision if main else "fp32"
        self.titles[1].setText(f"Loading {spec}…")
        classes, prompt = shared_classes(main), prompt_of(main) if main is not None else None
        self.view_state.update(other_request=(spec, device, precision, classes, prompt))
        self.jobs.start("load", "Loading second model", load_second_model, spec, device, precision, classes,
                        prompt, on_result=self.set_other, on_error=self._on_load_error)

    def _on_context_changed(self, *changed) -> None:
        self.layers.refresh()  # keyed to both models and the image: their stale work is dropped at once, shown or not
        super()._on_context_changed(*changed)

    def _on_model_loaded(self, model) -> None:
        """After the explorer's update (it connected first): a run offers its base model as the second one; a
        CLIP-style second model follows the current model's classes."""
        base = base_model(local_folder(model.name)) if not self.other_name.currentText().strip() else None
        if base is not None and not base.startswith("custom:"):  # a run: before vs after fine-tuning, offered first
            # (a run trained from scratch has no "before" to load: custom: is a new random model)
            self.other_name.setEditText(base)
        classes, prompt, other = shared_classes(model), prompt_of(model), self.other
        if (other is not None and is_clip_style(other) and classes
                and (tuple(other.labels), prompt_of(other)) != (classes, prompt)):
            # the current model's classes changed: the CLIP-style second model follows (its text tower only)
            self.titles[1].setText(f"Encoding the classes for {other.display_name}…")
            self.view_state.update(other_request=(other.name, str(other.device), other.precision, classes, prompt))
            self.jobs.start("load", "Classes for the second model", with_shared_classes, other, classes, prompt,
                            on_result=self.set_other, on_error=self._on_load_error)

    def _on_load_error(self, exc: BaseException) -> None:
        """A second model that failed to load leaves the one compared before, named as it is (the title said "not
        loaded" over the old model's map)."""
        self._show()
        if self.other is not None:
            self.other_name.setEditText(self.other.name)
        self.report_error(exc)

    def set_other(self, loaded) -> None:
        self.jobs.clear("load")  # held by `self.other`; the slot must not keep a second reference
        self.other = loaded
        mark_available(self.view_kind, loaded)
        given = f" (classes from the current model: {', '.join(loaded.labels[:5])}{'…' * (len(loaded.labels) > 5)})" \
            if is_clip_style(loaded) and loaded.labels else ""
        self.state.message.emit("info", f"Second model for comparison: {loaded.name}{given}")
        self.view_state.update(other=loaded.uid)

    def _on_smooth(self, on: bool) -> None:
        for view in self.views:
            view.smooth = on
        self._show()

    @property
    def results(self) -> list | None:
        """[(crop, map, top-1 text)] for the current model and the second one (once loaded), the image and the
        method; else None."""
        return self.jobs.current("compare")

    def reload(self) -> None:
        ctx = self.context()
        if ctx is None:
            self._show()
            return
        if self.results is not None or self.jobs.running("compare"):
            return
        model, entry = ctx
        other, method = self.other, self.view_state.method
        self._show()
        reasons = [why_not(m.model, method) if m is not None else None for m in (model, other)]
        if any(reasons):  # e.g. rollout of a Swin: say why instead of failing in a worker
            for title, reason in zip(self.titles, reasons):
                if reason:
                    title.setText(f"{title.text()}<br>{registry.get(method).title} does not apply: {reason}")
            return
        self.jobs.start("compare", "Compare", compare_job, model, other, entry.image, method,
                        on_result=self._on_results, on_error=self.report_error)

    def _on_results(self, _results) -> None:
        self._show()

    def shared_levels(self) -> tuple[float, float] | None:
        if not self.results:
            return None
        lo = min(float(r[1].min()) for r in self.results)
        hi = max(float(r[1].max()) for r in self.results)
        return lo, hi if hi > lo else lo + 1e-12

    def _show(self, *_changed) -> None:
        models = (self.state.model, self.other)
        results = self.results
        for i, model in enumerate(models):
            name = model.display_name if model is not None else "not loaded: load one above to compare"
            if results and i < len(results):
                crop, arr, top1 = results[i]
                self.views[i].set_image(crop)
                self.views[i].set_map(arr, self.view_state.cmap, 0.6, self.shared_levels())
                self.titles[i].setText(f"<b>{name}</b><br>top-1: {top1}")
            else:
                self.views[i].set_map(None)
                self.titles[i].setText(f"<b>{'Current' if i == 0 else 'Second'} model:</b> {name}")

    def redraw(self) -> None:
        self._show()

    def export_data(self):
        if not self.results or len(self.results) < 2:  # a comparison: both maps
            return None
        stacked = np.stack([r[1] for r in self.results]) if self.results[0][1].shape == self.results[1][1].shape \
            else self.results[0][1]
        method = self.view_state.method
        return f"compare-{method}", stacked, self.record(method, {}, models=[self.state.model.name, self.other.name],
                                                         shared_levels=list(self.shared_levels()))
