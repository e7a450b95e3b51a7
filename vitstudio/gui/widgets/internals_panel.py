"""Model internals (ViT paper Fig. 7): position-embedding similarity grid and patch-embedding filter components."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from vitstudio.core.analysis.explain import explain, render

from .. import workers
from .explorer_base import ExplorerPanel

POS_TEXT = ("Position-embedding similarity: tile (r, c) shows the cosine similarity of patch (r, c)'s position "
            "embedding to every other patch's.")
FILTERS_TEXT = "First 28 principal components of the patch-embedding filters (RGB)."


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


def _internals(cancel, model) -> dict:
    """Runs in a worker: both pictures of `model`, or why one does not apply."""
    out = {"model": model.uid}
    for method in ("pos-embed", "filters"):
        try:
            exp = explain(model, method)
            out[method] = (exp, render(exp))
        except ValueError as exc:  # no learned pos-embed / hybrid stem
            out[method] = str(exc)
    return out


class InternalsPanel(ExplorerPanel):
    """Depends on the model only: the image is not part of its request, so selecting images costs nothing here."""

    def __init__(self, state, parent: QWidget | None = None) -> None:
        super().__init__(state, parent)
        self.jobs = workers.ViewJobs(self.view_state, {"internals": ()})
        pos_box, self.pos_label, self.pos_view, self.pos_item = _picture_view(POS_TEXT)
        fil_box, self.fil_label, self.fil_view, self.fil_item = _picture_view(FILTERS_TEXT)
        layout = QHBoxLayout(self)
        layout.addWidget(pos_box, 1)
        layout.addWidget(fil_box, 1)
        self.view_state.connect(self._on_view_state)

    @property
    def results(self) -> dict:
        """{'model': uid, 'pos-embed': (Explanation, rgb) or why not, 'filters': ...} of the current model."""
        return self.jobs.current("internals") or {}

    def context(self):
        return (self.state.model, None) if self.state.model is not None else None

    def _on_image_selected(self, entry) -> None:
        pass  # these views depend on the model only

    def _on_view_state(self, name: str, _value) -> None:
        if name == "model":
            self._show()  # nothing of the previous model stays on screen

    def reload(self) -> None:
        model = self.state.model
        if model is None or self.results or self.jobs.running("internals"):
            return
        self.jobs.start("internals", "Model internals", _internals, model, on_result=self._on_result,
                        on_error=self.report_error)

    def _on_result(self, _results) -> None:
        self._show()

    def _show(self) -> None:
        results = self.results
        for method, item, view, label, text in (
                ("pos-embed", self.pos_item, self.pos_view, self.pos_label, POS_TEXT),
                ("filters", self.fil_item, self.fil_view, self.fil_label, FILTERS_TEXT)):
            value = results.get(method)
            if isinstance(value, str):
                item.clear()
                label.setText(f"Not available for this model: {value}")
            elif value is not None:
                label.setText(text)
                item.setImage(value[1], levels=(0, 255))
                view.autoRange(padding=0.01)
            else:
                item.clear()
                label.setText(text)

    def export_data(self):
        value = self.results.get("pos-embed")
        if value is None or isinstance(value, str):
            return None
        return "pos-embed", value[0].array, self.record("pos-embed", value[0].params)
