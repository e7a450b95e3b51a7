"""One binding for every control: `bind(widget, state, field)` keeps a Qt control and a view-state field in step
both ways (as magicgui ties a widget to an annotation), so no panel writes its own mirror or reads back from a
widget a value the state holds.

- The user's change goes into the state (`state.update(field=value)`), where the field's spec checks it; a value
  the spec refuses is put back on the control from the state.
- A change of the state shows on the control without being fed back (the control's signals are blocked), and
  only where the control does not show that value already: a spin box being typed into ("0.5", one keystroke at a
  time) keeps its text.
- The control takes what the spec declares: a combo box with no items gets the spec's choices (shown by their
  `labels` where the spec has them), a spin box or slider the spec's range (an open upper end one step below it);
  when the state declares a new range or new choices (`state.redeclare`, e.g. a model switch's depth or classes),
  the control takes them too, here and nowhere else with its signals blocked.

An editable combo box holds a field's text (what is typed, or a listed item's text), followed as it is typed.
Other combo boxes hold a field's value as an item's data (labels for people, values for the state: "attends to" -> "to";
a placeholder item without data, e.g. "all classes", is None) unless the field has choices and the items carry no
data (the choices are then the items' texts, as `_declare` adds them). A line edit gives its stripped text, or None
when empty, once editing finishes (Return, or the field left), or at every keystroke with `live=True` (for fields
whose readers are cheap and say something as the user types: a run name that is taken).

A compound control (the Training form's row of one setting: a tuple's spin boxes, a list typed as text) reads and
writes itself; what it cannot read yet, or what the field refuses, stays on screen as typed and is the binding's
`problem` (the form names it when the values are used) rather than being overwritten under the user's fingers.
"""

from __future__ import annotations

from contextlib import ExitStack

from PySide6.QtCore import QSignalBlocker
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSlider,
    QComboBox,
    QDoubleSpinBox,
    QGroupBox,
    QLineEdit,
    QSpinBox,
    QWidget,
)


class Binding:
    """A control and one field of a view state; kept alive by the state's event it listens to. `problem`: why
    what a compound control shows is not the field's value (unreadable, or refused), until it is again."""

    def __init__(self, widget, state, field: str, live: bool = False) -> None:
        self.widget, self.state, self.field = widget, state, field
        self.problem: str | None = None
        self.compound = not isinstance(widget, QWidget)
        if self.compound:
            widget.connect_changed(self.from_widget)
        else:
            spec = state.fields()[field]
            self.declared_choices = isinstance(widget, QComboBox) and widget.count() == 0 and bool(spec.choices)
            _declare(widget, spec)
            self.by_data = isinstance(widget, QComboBox) and (spec.choices is None or _has_data(widget))
            _changed_signal(widget, live).connect(self.from_widget)
            getattr(state.spec_events, field).connect(self.declare)
        self.show(getattr(state, field))
        getattr(state.events, field).connect(self.show)

    def declare(self, spec) -> None:
        """The field's new spec: a new range, or new choices where the binding filled the combo from the field's
        choices (a combo whose items the view wrote itself keeps them)."""
        with QSignalBlocker(self.widget):
            if isinstance(self.widget, QComboBox):
                if not self.declared_choices:
                    return
                self.widget.clear()
                _declare(self.widget, spec)
                self.by_data = spec.labels is not None
            else:
                _declare(self.widget, spec)
            _write(self.widget, getattr(self.state, self.field), self.by_data)

    def from_widget(self, *_args) -> None:
        try:
            value = self._read()
        except ValueError as exc:  # typed halfway ("0.5," of three numbers): kept as typed, said when used
            self.problem = str(exc)
            return
        try:
            self.state.update(**{self.field: value})
            self.problem = None
        except (TypeError, ValueError) as exc:
            if self.compound:  # a form's text: the user's typing stays, the field keeps its last good value
                self.problem = str(exc)
            else:
                self.show(getattr(self.state, self.field))  # refused: the control shows the state again

    def show(self, value) -> None:
        try:
            shown = self._read() == value
        except ValueError:
            shown = False
        self.problem = None
        if shown:  # shown already, e.g. being typed: a rewrite would garble it
            return
        with ExitStack() as blocked:
            for w in self.widget.widgets() if self.compound else (self.widget,):
                blocked.enter_context(QSignalBlocker(w))
            if self.compound:
                self.widget.set_value(value)
            else:
                _write(self.widget, value, self.by_data)

    def _read(self):
        return self.widget.value() if self.compound else _read(self.widget, self.by_data)


def bind(widget, state, field: str, live: bool = False) -> Binding:
    """Keep `widget` and `state.<field>` in step both ways (see the module's docstring). `widget` is a Qt control,
    or a compound control of several (a form's row: `value()`, `set_value(v)`, `connect_changed(slot)`,
    `widgets()`), whose `value()` may raise ValueError for what cannot be read yet."""
    return Binding(widget, state, field, live)


def _declare(widget, spec) -> None:
    if isinstance(widget, QComboBox) and widget.count() == 0 and spec.choices:
        if spec.labels is not None:  # people read the labels; the state holds the values
            for label, value in zip(spec.labels, spec.choices, strict=True):
                widget.addItem(label, value)
        else:
            widget.addItems([str(c) for c in spec.choices])
    elif isinstance(widget, (QSpinBox, QDoubleSpinBox, QAbstractSlider)) and spec.range is not None:
        r = spec.range
        step = widget.singleStep() if isinstance(widget, QDoubleSpinBox) else 1
        lo = r.lo + (step if r.lo_open else 0)
        hi = r.hi - (step if r.hi_open else 0) if r.hi is not None else widget.maximum()
        widget.setRange(lo, hi)


def _changed_signal(widget, live: bool = False):
    if isinstance(widget, QComboBox):
        return widget.editTextChanged if widget.isEditable() else widget.currentIndexChanged
    if isinstance(widget, QLineEdit):
        return widget.textChanged if live else widget.editingFinished
    if isinstance(widget, (QAbstractButton, QGroupBox)):  # a check box, a checkable group (Advanced settings)
        return widget.toggled
    if isinstance(widget, (QSpinBox, QDoubleSpinBox, QAbstractSlider)):
        return widget.valueChanged
    raise TypeError(f"bind() does not know how to follow a {type(widget).__name__}")


def _has_data(combo: QComboBox) -> bool:
    return any(combo.itemData(i) is not None for i in range(combo.count()))


def _read(widget, by_data: bool):
    if isinstance(widget, QComboBox) and widget.isEditable():
        return widget.currentText().strip() or None
    if isinstance(widget, QComboBox):
        return widget.currentData() if by_data else widget.currentText()
    if isinstance(widget, QLineEdit):
        return widget.text().strip() or None
    if isinstance(widget, (QAbstractButton, QGroupBox)):
        return widget.isChecked()
    if isinstance(widget, QDoubleSpinBox):
        return round(widget.value(), widget.decimals())  # the value shown, not its binary neighbour
    return widget.value()


def _write(widget, value, by_data: bool) -> None:
    if isinstance(widget, QComboBox) and widget.isEditable():
        widget.setEditText("" if value is None else str(value))
    elif isinstance(widget, QComboBox):
        if not by_data:
            index = widget.findText(str(value))
        elif value is None:  # findData cannot look for None: the first item without data ("top-1 prediction")
            index = next((i for i in range(widget.count()) if widget.itemData(i) is None), 0)
        else:
            index = widget.findData(value)
        widget.setCurrentIndex(max(index, 0))
    elif isinstance(widget, QLineEdit):
        widget.setText("" if value is None else str(value))
    elif isinstance(widget, (QAbstractButton, QGroupBox)):
        widget.setChecked(bool(value))
    else:
        widget.setValue(value)
