"""An explorer's parameter form, generated from the analysis registry (as the Training form is from TrainConfig's
schema): one row per parameter the panel's analyses take, its control made from the parameter's kind and spec and
bound to the view field of the same name, shown only while the chosen analysis takes it. A new analysis with a new
float or choice parameter gets its control here, with no GUI code."""

from __future__ import annotations

import functools

from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QSpinBox,
    QToolButton,
    QWidget,
)

from vitstudio.core.analysis import registry

from ..common.bind import bind
from .explorer_base import layer_slider

FILE_FILTERS = {"concepts": "Concepts (*.safetensors)"}  # a file parameter's dialog filter, by its name


class ParamForm:
    """The rows of `form` for every parameter of `methods` (a clicked patch has no row: it is picked on the image).

    `controls[name]` is the control bound to `view_state.<name>`; `labels` gives a choice's values the words people
    read ({"to": "attends to"}). A control whose range or choices follow the model (layer, head, class) takes them
    from the field's spec, which the panel redeclares with the model."""

    def __init__(self, form: QFormLayout, view_state, methods, labels: dict | None = None) -> None:
        self.form, self.view_state = form, view_state
        self.controls: dict[str, QWidget] = {}
        self.choosers: dict[str, QToolButton] = {}  # name -> the … button of a file parameter
        self.rows: dict[str, object] = {}  # name -> the widget or layout of its form row
        self.layer_label = None
        for name in methods:
            for p in registry.get(name).params:
                if p.name in self.rows or p.kind == "patch":
                    continue
                control, row = self._control(p, (labels or {}).get(p.name))
                self.controls[p.name], self.rows[p.name] = control, row
                form.addRow(p.title, row)
                bind(control, view_state, p.name)

    def _control(self, p, labels: dict | None):
        if p.kind == "layer":
            slider, self.layer_label, row = layer_slider()
            return slider, row
        if p.kind in ("head", "index"):
            box = QSpinBox(maximum=(1 << 20) if p.kind == "index" else 99)
        elif p.kind == "class":  # the binding fills it from the field's choices, which follow the model
            box = QComboBox()
        elif p.kind == "choice":
            box = QComboBox()
            for value in p.choices:
                if labels is None:
                    break
                if value in labels:
                    box.addItem(labels[value], value)
        elif p.kind == "float":
            box = QDoubleSpinBox(decimals=2)
            if p.range is not None and p.range.hi is not None:
                box.setSingleStep(round((p.range.hi - p.range.lo) / 20, 2) or 0.01)
        elif p.kind == registry.TEXT_KIND:
            box = QLineEdit(placeholderText="e.g. a bee (Enter)")
        elif p.kind == registry.FILE_KIND:  # the Concepts tab fills it; a path can be typed or chosen too
            box = QLineEdit(placeholderText="learn or open one in the Concepts tab")
            box.setToolTip(p.help)
            return box, self._with_chooser(box, p)
        else:
            raise ValueError(f"no control for a parameter of kind {p.kind!r} ({p.name})")
        box.setToolTip(p.help)
        return box, box

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
