"""Model internals (ViT paper Fig. 7): position-embedding similarity grid and patch-embedding filter components."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from vitstudio.core.analysis.explain import explain, render

from .. import workers
from .explorer_base import ExplorerPanel


def _picture_view(title: str):
    box = QWidget()
    layout = QVBoxLayout(box)
    label = QLabel(title)
    label.setWordWrap(True)
    layout.addWidget(label)
    widget = pg.GraphicsLayoutWidget()
    view = widget.addViewBox(lockAspect=True, invertY=True)
    item = pg.ImageItem()
    view.addItem(item)
    layout.addWidget(widget, 1)
    return box, label, view, item


class InternalsPanel(ExplorerPanel):
    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(state, parent)
        self.results: dict[str, object] = {}
        self._job = workers.LatestJob()
        pos_box, self.pos_label, self.pos_view, self.pos_item = _picture_view(
            "Position-embedding similarity: tile (r, c) shows the cosine similarity of patch (r, c)'s position "
            "embedding to every other patch's.")
        fil_box, self.fil_label, self.fil_view, self.fil_item = _picture_view(
            "First 28 principal components of the patch-embedding filters (RGB).")
        layout = QHBoxLayout(self)
        layout.addWidget(pos_box, 1)
        layout.addWidget(fil_box, 1)

    def context(self):
        return (self.state.model, None) if self.state.model is not None else None

    def reload(self) -> None:
        model = self.state.model
        if model is None or self.results.get("model") == model.uid:
            return  # these views depend on the model only, not on the image
        self.results = {}

        def run(cancel):
            out = {"model": model.uid}  # the key, not the model: a hidden tab must not keep it alive
            for method in ("pos-embed", "filters"):
                try:
                    exp = explain(model, method)
                    out[method] = (exp, render(exp))
                except ValueError as exc:  # no learned pos-embed / hybrid stem
                    out[method] = str(exc)
            return out

        self._job.start("Model internals", run, on_result=self._on_result, on_error=self.report_error)

    def _on_result(self, results) -> None:
        self.results = results
        for method, item, view, label in (("pos-embed", self.pos_item, self.pos_view, self.pos_label),
                                          ("filters", self.fil_item, self.fil_view, self.fil_label)):
            value = results.get(method)
            if isinstance(value, str):
                item.clear()
                label.setText(f"Not available for this model: {value}")
            elif value is not None:
                item.setImage(value[1], levels=(0, 255))
                view.autoRange(padding=0.01)

    def export_data(self):
        value = self.results.get("pos-embed")
        if value is None or isinstance(value, str):
            return None
        return "pos-embed", value[0].array, self.record("pos-embed", value[0].params)
