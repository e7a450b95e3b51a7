"""Model internals (ViT paper Fig. 7): position-embedding similarity grid and patch-embedding filter components."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from vitstudio.app.analyses import registry
from vitstudio.app.explore_jobs import internals_job

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
    """Depends on the model only: the image is not part of its request, so selecting images costs nothing here."""

    explorer_id = "internals"

    def __init__(self, app, parent: QWidget | None = None) -> None:
        super().__init__(app, parent)
        self.methods = registry.names("model")  # position-embedding similarity, patch-embedding filters, …
        self.pictures = {}  # method -> (label, view box, image item)
        layout = QHBoxLayout(self)
        for method in self.methods:
            box, label, view, item = _picture_view(self._caption(method))
            self.pictures[method] = (label, view, item)
            layout.addWidget(box, 1)
        self.view_state.connect(self._on_view_state)

    @staticmethod
    def _caption(method: str) -> str:
        analysis = registry.get(method)
        return analysis.caption or f"{analysis.title}: {analysis.help}"

    def label(self, method: str):
        """The caption (or the reason it does not apply) above `method`'s picture."""
        return self.pictures[method][0]

    def item(self, method: str):
        """The image item that draws `method`'s picture."""
        return self.pictures[method][2]

    @property
    def results(self) -> dict:
        """{'model': uid, method: (Explanation, rgb) or why not, …} of the current model."""
        return self.jobs.current("internals") or {}

    def context(self):
        return (self.state.model, None) if self.state.model is not None else None

    def _on_view_state(self, name: str, _value) -> None:
        if name == "model":
            self._show()  # nothing of the previous model stays on screen

    def reload(self) -> None:
        model = self.state.model
        if model is None or self.results or self.jobs.running("internals"):
            return
        self.jobs.start("internals", "Model internals", internals_job, model, on_result=self._on_result,
                        on_error=self.report_error)

    def _on_result(self, _results) -> None:
        self._show()

    def _show(self) -> None:
        results = self.results
        for method, (label, view, item) in self.pictures.items():
            text = self._caption(method)
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

    def redraw(self) -> None:
        self._show()

    def export_data(self):
        method = self.methods[0]  # the first picture (position-embedding similarity)
        value = self.results.get(method)
        if value is None or isinstance(value, str):
            return None
        return method, value[0].array, self.record(method, value[0].params)
