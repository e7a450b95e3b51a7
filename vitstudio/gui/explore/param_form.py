"""An explorer's parameter form, generated from the analysis registry (as the Training form is from TrainConfig's
schema): one row per parameter the panel's analyses take, its control made from the parameter's kind and spec and
bound to the view field of the same name, shown only while the chosen analysis takes it. A new analysis with a new
float or choice parameter gets its control here, with no GUI code."""

from __future__ import annotations

import functools

from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QToolButton,
    QWidget,
)

from vitstudio.app.analyses import registry

from ..common.bind import bind
from ..common.type_map import control_for
from .explorer_base import layer_slider

FILE_FILTERS = {"concepts": "Concepts (*.safetensors)"}  # a file parameter's dialog filter, by its name


class ParamForm:
    """The rows of `form` for every parameter of `methods` (a clicked patch has no row: it is picked on the image).

    `controls[name]` is the control bound to `view_state.<name>`, made by the type map from that field's spec (the
    words people read for a choice are the field's labels). A control whose range or choices follow the model
    (layer, head, class) takes them from the field's spec, which the panel redeclares with the model."""

    def __init__(self, form: QFormLayout, view_state, methods) -> None:
        self.form, self.view_state = form, view_state
        self.controls: dict[str, QWidget] = {}
        self.choosers: dict[str, QToolButton] = {}  # name -> the … button of a file parameter
        self.rows: dict[str, object] = {}  # name -> the widget or layout of its form row
        self.layer_label = None
        for name in methods:
            for p in registry.get(name).params:
                if p.name in self.rows or p.kind == "patch":
                    continue
                control, row = self._control(p)
                self.controls[p.name], self.rows[p.name] = control, row
                form.addRow(p.title, row)
                bind(control, view_state, p.name)

    def _control(self, p):
        """The control of parameter `p`, from the spec of the state's field (the type map), and its form row."""
        spec = self.view_state.fields()[p.name]
        if p.kind == "layer":
            slider, self.layer_label, row = layer_slider(control_for(spec, widget="slider"))
            return slider, row
        placeholder = {registry.TEXT_KIND: "e.g. a bee (Enter)",
                       registry.FILE_KIND: "learn or open one in the Concepts tab"}.get(p.kind, "")
        box = control_for(spec, title=p.title, placeholder=placeholder)
        box.setToolTip(p.help)
        return box, self._with_chooser(box, p) if p.kind == registry.FILE_KIND else box

    def _with_chooser(self, box: QLineEdit, p) -> QWidget:
        """The line and a … button whose file dialog sets the field (the binding fills the line)."""
        row, button = QWidget(), QToolButton(text="…")
        button.setToolTip(f"Choose the {p.title.lower()}")
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(box, 1)
        layout.addWidget(button)
        self.choosers[p.name] = button
        button.clicked.connect(functools.partial(self._choose_file, p))
        return row

    def _choose_file(self, p) -> None:
        from .. import file_dialogs

        path = file_dialogs.open_file(self.form.parentWidget(), f"Open a {p.title.lower()}", FILE_FILTERS.get(
            p.name, ""))
        if path:
            setattr(self.view_state, p.name, path)

    def show_for(self, method: str) -> None:
        """Show the rows of the parameters `method` takes; hide the others."""
        used = registry.get(method).param_names
        for name, row in self.rows.items():
            self.form.setRowVisible(row, name in used)

    def fix_width(self, column: QWidget, methods) -> None:
        """`column` (the form's) fixed at its width with the widest method's rows, so the view beside it keeps its
        place and size whichever method is chosen."""
        widest = 0
        for method in methods:
            self.show_for(method)
            widest = max(widest, column.sizeHint().width())
        column.setFixedWidth(min(widest, column.maximumWidth()))
