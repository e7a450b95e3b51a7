"""One map from a field's spec to the control that edits it (magicgui's `type_map`): every single-value control of
the app's forms is made here from the FieldSpec of the field it will be bound to (`bind`), so a new parameter or
setting gets its control with no GUI code, and a control never carries a range or choice list of its own — `bind`
declares those from the spec and follows the spec when the state redeclares it.

    bool              → a check box (its label: the field's title)
    choices           → a combo box, filled by `bind` from the choices (shown by their labels)
    int               → a spin box; a slider where `widget="slider"` (a layer: dragged, not typed)
    float             → a spin box of `decimals`, stepping a twentieth of a closed range
    str, path, other  → a line edit (`placeholder` says what to type)
    a registered kind → what `register(kind, make)` makes (checked first, through the kind's base classes)

A training or concepts Setting (core/train/schema.py) whose value is compound — a tuple typed as numbers or paths, an
optional value whose minimum or first item reads "none"/"auto", a string with editable suggestions — is the map's
other entry: `SettingControl`, one control read and written as one value, which `bind` drives as it does a single
widget (the Training form's and the Concepts tab's controls, as the CLI's options are `add_config_options`').
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLineEdit, QSlider, QSpinBox, QWidget

from vitstudio.app.training_settings import Setting
from vitstudio.core.fields import FieldSpec

INT_MAX = 2**31 - 1  # what a QSpinBox holds (a C int): an open upper end


_REGISTERED: dict[type, object] = {}  # a field's kind → a maker of its control, added by `register`


def register(kind: type, make) -> None:
    """Open the map to a new kind of field (magicgui's `register_type`): `make(spec, title=...)` returns the control
    of a field of that kind (or of a subclass of it) — a Qt widget `bind` knows, or a compound control with
    `connect_changed`, `widgets`, `value` and `set_value`. A later registration of the same kind replaces it."""
    _REGISTERED[kind] = make


def unregister(kind: type) -> None:
    _REGISTERED.pop(kind, None)


def _registered(kind):
    for klass in getattr(kind, "__mro__", ()):
        if klass in _REGISTERED:
            return _REGISTERED[klass]
    return None


def control_for(spec: FieldSpec, *, title: str = "", widget: str | None = None, decimals: int = 2,
                placeholder: str = "") -> QWidget:
    """The control of a field of `spec`, unbound; `widget`: "slider" for an int dragged over its range. A kind
    registered with `register` gets its registered control (choices still give a combo box)."""
    kind = spec.kind
    make = _registered(kind) if spec.choices is None else None
    if make is not None:
        return make(spec, title=title)
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


_ON_OFF = {"on": True, "off": False}


class SettingControl:
    """The widget(s) of one Setting, read and written as one value: a compound control for `bind()`. `parts` are
    the widgets by name (a tuple's items as NAME_PART, e.g. scale_min), which `TrainingFormWidget.inputs` exposes."""

    def __init__(self, s: Setting) -> None:
        self.setting = s
        self.parts: dict[str, QWidget] = {}
        if s.kind is bool:
            self.widget = QCheckBox(s.label) if not s.optional else _combo([s.none_text or "auto", *_ON_OFF])
        elif s.length > 0 and not s.optional:
            self.widget = QWidget()
            row = QHBoxLayout(self.widget)
            row.setContentsMargins(0, 0, 0, 0)
            for part in s.parts:
                self.parts[f"{s.name}_{part}"] = box = _spin(s)
                row.addWidget(box)
        elif s.length or (s.kind is str and s.choices is None and not s.suggestions):
            self.widget = QLineEdit()
            example = f"e.g. {', '.join(['0.5'] * s.length)}" if s.length > 0 else "separated by ;"
            self.widget.setPlaceholderText(f"{s.none_text or 'none'}; {example}" if s.length else s.none_text)
        elif s.kind is str:
            self.widget = _combo([s.none_text] * s.optional + list(s.choices or s.suggestions))
            self.widget.setEditable(s.choices is None)
            if s.choices is None and s.none_text:
                self.widget.lineEdit().setPlaceholderText(s.none_text)
        else:
            self.widget = _spin(s)
        self.parts = self.parts or {s.name: self.widget}
        self.widget.setToolTip(s.help)

    def connect_changed(self, slot) -> None:
        """`slot()` after any change of this setting's widgets, by the user or by code."""
        for w in self.parts.values() if len(self.parts) > 1 else [self.widget]:
            if isinstance(w, QCheckBox):
                w.toggled.connect(slot)
            elif isinstance(w, QComboBox):
                w.currentTextChanged.connect(slot)
            elif isinstance(w, QLineEdit):
                w.textChanged.connect(slot)
            else:
                w.valueChanged.connect(slot)

    def widgets(self) -> list[QWidget]:
        return list(self.parts.values())

    @property
    def label(self) -> str:
        return "" if isinstance(self.widget, QCheckBox) else self.setting.label

    def value(self):
        """The value shown, or a ValueError naming the setting (typed wrongly, or outside its range: the CLI's
        message)."""
        value = self._shown()
        self.setting.check(value)
        return value

    def _shown(self):
        s, w = self.setting, self.widget
        if s.kind is bool:
            return w.isChecked() if isinstance(w, QCheckBox) else _ON_OFF.get(w.currentText())
        if s.length > 0 and not s.optional:
            items = tuple(box.value() for box in self.parts.values())
            return tuple(sorted(items)) if s.ordered else items
        if isinstance(w, QLineEdit):
            return _parse_items(s, w.text()) if s.length else (w.text().strip() or (None if s.optional else s.default))
        if isinstance(w, QComboBox):
            text = w.currentText().strip()
            return None if s.optional and text in ("", s.none_text) else (text or s.default)
        value = w.value()
        return None if s.optional and value == w.minimum() else value

    def set_value(self, value) -> None:
        s, w = self.setting, self.widget
        if isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif s.length > 0 and not s.optional:
            for box, item in zip(self.parts.values(), value):
                box.setValue(item)
        elif isinstance(w, QLineEdit):
            w.setText("" if value is None else "; ".join(map(str, value)) if s.length == -1
                      else ", ".join(f"{v:g}" for v in value) if s.length else str(value))
        elif isinstance(w, QComboBox):
            text = ({True: "on", False: "off"}.get(value, s.none_text or "auto") if s.kind is bool
                    else s.none_text if value is None else str(value))
            w.setCurrentText(text)
        else:
            w.setValue(w.minimum() if value is None else value)


def _combo(items: list[str]) -> QComboBox:
    box = QComboBox()
    box.addItems(items)
    return box


def _spin(s: Setting) -> QSpinBox | QDoubleSpinBox:
    """A spin box over the setting's range; its minimum reads as `none_text` ("off", "the model's"), and as None
    for an optional setting."""
    r = s.range
    lo, hi = (r.lo, r.hi if r.hi is not None else 1e9) if r is not None else (0, 1e9)
    if s.kind is int:
        box = QSpinBox()
        lo, hi = int(lo) + (r is not None and r.lo_open), int(min(hi, INT_MAX)) - (r is not None and r.hi_open)
    else:
        box = QDoubleSpinBox(decimals=s.decimals)
        eps = 10.0 ** -s.decimals
        lo, hi = lo + eps * (r is not None and r.lo_open), hi - eps * (r is not None and r.hi_open)
        box.setSingleStep(10.0 ** -min(s.decimals, 3))
    if s.optional:
        lo = min(lo, 0)
    box.setRange(lo, hi)
    if s.none_text and box.minimum() == 0:
        box.setSpecialValueText(s.none_text)
    return box


def _parse_items(s: Setting, text: str):
    """A tuple typed as text: "0.5, 0.5, 0.5" (numbers) or "a.png; b.png" (paths); empty: None (or ())."""
    if not text.strip():
        return None if s.optional else ()
    if s.length == -1:
        return tuple(t.strip() for t in text.split(";") if t.strip())
    try:
        items = tuple(s.kind(t) for t in text.replace(",", " ").split())
    except ValueError:
        items = ()
    if len(items) != s.length:
        raise ValueError(f"{s.title} needs {s.length} numbers ({', '.join(s.parts)}), not {text!r}.")
    return items
