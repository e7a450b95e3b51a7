"""One map from a field's spec to the control that edits it (magicgui's `type_map`): every single-value control of
the app's forms is made here from the FieldSpec of the field it will be bound to (`bind`), so a new parameter or
setting gets its control with no GUI code, and a control never carries a range or choice list of its own — `bind`
declares those from the spec and follows the spec when the state redeclares it.

    bool              → a check box (its label: the field's title)
    choices           → a combo box, filled by `bind` from the choices (shown by their labels)
    int               → a spin box; a slider where `widget="slider"` (a layer: dragged, not typed)
    float             → a spin box of `decimals`, stepping a twentieth of a closed range
    str, path, other  → a line edit (`placeholder` says what to type)
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSlider, QSpinBox, QWidget

from vitstudio.core.fields import FieldSpec

INT_MAX = 2**31 - 1  # what a QSpinBox holds (a C int): an open upper end


def control_for(spec: FieldSpec, *, title: str = "", widget: str | None = None, decimals: int = 2,
                placeholder: str = "") -> QWidget:
    """The control of a field of `spec`, unbound; `widget`: "slider" for an int dragged over its range."""
    kind = spec.kind
    if spec.choices is not None:
        control = QComboBox()
    elif kind is bool:
        control = QCheckBox(title)
        control.setChecked(bool(spec.default))
    elif kind is int and widget == "slider":
        control = QSlider(Qt.Horizontal)
    elif kind is int:
        control = QSpinBox(maximum=INT_MAX)
    elif kind is float:
        control = QDoubleSpinBox(decimals=decimals, maximum=float(INT_MAX))
        r = spec.range
        if r is not None and r.hi is not None:
            control.setSingleStep(round((r.hi - r.lo) / 20, decimals) or 10.0 ** -decimals)
    else:
        control = QLineEdit(placeholderText=placeholder)
    if spec.help:
        control.setToolTip(spec.help)
    return control
