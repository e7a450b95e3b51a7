"""One binding for every control (issue 30, item 2): `bind(widget, state, field)` keeps both in step, both ways,
takes its choices and range from the field's spec and never feeds the state's own change back into it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSlider, QSpinBox

from vitstudio.app.evented import ViewState
from vitstudio.core.fields import DISCARD, FUSIONS, MASS_MASK, OPACITY, FieldSpec
from vitstudio.gui.common.bind import bind


class ToyView(ViewState):
    """A declared view state: annotations are the fields, each with its own event."""

    layer: int = 0
    fusion: str = FieldSpec("mean", choices=FUSIONS)
    discard: float = FieldSpec(0.0, range=DISCARD)
    opacity: int = FieldSpec(60, range=OPACITY)
    mask: int = FieldSpec(0, range=MASS_MASK)
    direction: str = FieldSpec("to", choices=("to", "by"))
    text: str | None = None
    smooth: bool = True


def test_declared_fields_are_typed_and_each_has_its_own_event():
    """Annotation types become the fields' kinds; `events.layer` hears only the layer, once per change; bad
    type/range/choice refused; instances do not share values.
    """
    state = ToyView()
    assert state.fields()["layer"].kind is int and state.fields()["text"].kind is str
    assert state.fields()["fusion"].kind is str and state.fusion == "mean"
    layers, everything = [], []
    state.events.layer.connect(layers.append)
    state.connect(lambda name, value: everything.append(name))
    state.update(layer=3, fusion="max")
    assert layers == [3] and everything == ["layer", "fusion"]
    state.update(fusion="min")
    assert layers == [3]  # the layer's listeners hear only the layer
    for bad in (dict(layer="3"), dict(discard=1.0), dict(fusion="median"), dict(mask=100)):
        try:
            state.update(**bad)
        except (TypeError, ValueError):
            pass
        else:
            raise AssertionError(f"{bad} must be refused")
    assert ToyView().layer == 0  # each instance its own values


def test_controls_follow_the_state_and_the_state_follows_the_controls(qtbot):
    """A combo gets the spec's choices, spin boxes and sliders its range (an open end one step in); user edits (combo
    text or data, double spin, line edit stripped, check box) reach the state; state updates reach the controls once
    each, with no echo.
    """
    state = ToyView()
    fusion, discard, opacity, mask = QComboBox(), QDoubleSpinBox(decimals=2, singleStep=0.05), QSlider(Qt.Horizontal), \
        QSpinBox()
    direction, text, smooth, layer = QComboBox(), QLineEdit(), QCheckBox(), QSpinBox()
    direction.addItem("attends to", "to")
    direction.addItem("attended by", "by")
    for widget, name in ((fusion, "fusion"), (discard, "discard"), (opacity, "opacity"), (mask, "mask"),
                         (direction, "direction"), (text, "text"), (smooth, "smooth"), (layer, "layer")):
        qtbot.addWidget(widget)
        bind(widget, state, name)
    # the spec declares the controls: choices, ranges (an open end one step in)
    assert [fusion.itemText(i) for i in range(fusion.count())] == list(FUSIONS)
    assert (discard.minimum(), discard.maximum()) == (0.0, 0.99) and (opacity.minimum(), opacity.maximum()) == (0, 100)
    assert (mask.minimum(), mask.maximum()) == (0, 99)
    assert (fusion.currentText(), opacity.value(), smooth.isChecked()) == ("mean", 60, True)
    # the user's changes reach the state
    fusion.setCurrentText("max")
    discard.setValue(0.15)
    direction.setCurrentIndex(1)
    text.setText("  a bee ")
    text.editingFinished.emit()
    smooth.setChecked(False)
    assert (state.fusion, state.discard, state.direction, state.text, state.smooth) == ("max", 0.15, "by", "a bee",
                                                                                         False)
    # the state's changes reach the controls, without coming back as writes
    heard = []
    state.connect(lambda name, value: heard.append(name))
    state.update(fusion="min", direction="to", text=None, layer=4, opacity=10)
    assert (fusion.currentText(), direction.currentData(), text.text(), layer.value(), opacity.value()) == \
        ("min", "to", "", 4, 10)
    assert sorted(heard) == ["direction", "fusion", "layer", "opacity", "text"]  # once each, no echo


def test_a_value_the_spec_refuses_is_put_back_from_the_state(qtbot):
    """A control wider than its field: a refused value is replaced by the state's."""
    state = ToyView()
    box = QSpinBox()
    box.setRange(0, 1000)
    qtbot.addWidget(box)
    bind(box, state, "mask")
    box.setRange(0, 1000)  # a control wider than its field (set by hand after binding)
    box.setValue(250)
    assert state.mask == 0 and box.value() == 0


def test_typing_into_a_bound_spin_box_keeps_what_is_typed(qtbot):
    """Each keystroke reaches the state (keyboard tracking); the state's echo must not rewrite the text being
    typed ("0.5" over 0.9 once became 0.00, ".25" over 0.10 became 0.20).

    Keystrokes into a bound double/int spin box ("0.5" over 0.9, ".25" over 0.10, "50" over 30) end as typed in both the
    box and the state (the state's echo once rewrote the text mid-typing).
    """
    from PySide6.QtTest import QTest

    from vitstudio.core.fields import Range

    state = ViewState(min_conf=FieldSpec(0.0, float, range=Range(0.0, 1.0)), mask=FieldSpec(0, int, range=MASS_MASK))
    conf, mask = QDoubleSpinBox(decimals=2, singleStep=0.05), QSpinBox()
    for widget, name in ((conf, "min_conf"), (mask, "mask")):
        qtbot.addWidget(widget)
        bind(widget, state, name)
        widget.show()

    def type_into(box, text):
        box.setFocus()
        box.lineEdit().selectAll()
        for key in text:
            QTest.keyClicks(box, key)
        QTest.keyClick(box, Qt.Key_Return)

    for start, typed, expected in ((0.9, "0.5", 0.5), (0.1, ".25", 0.25)):
        conf.setValue(start)
        type_into(conf, typed)
        assert (conf.value(), state.min_conf) == (expected, expected), (typed, conf.text())
    mask.setValue(30)
    type_into(mask, "50")
    assert (mask.value(), state.mask) == (50, 50)


def test_a_control_follows_the_fields_new_range_and_choices_without_feeding_back(qtbot):
    """A model switch redeclares the layer's range and the class list: the bound slider and combo take them (the
    only place signals are blocked is the binding), the user's pick reaches the state as the value, not the label.

    `redeclare` of a slider's range and a combo's labelled choices (a model switch) reaches the bound controls with no
    signal fed back; the user's pick is the value, not the label; a value the new spec refuses shows as the default.
    """
    from vitstudio.core.fields import Range

    state = ViewState(layer=FieldSpec(0, int, range=Range(0, 1)),
                      target=FieldSpec(None, int, choices=(None,), labels=("top-1 prediction",)))
    slider, combo = QSlider(Qt.Horizontal), QComboBox()
    qtbot.addWidget(slider)
    qtbot.addWidget(combo)
    bind(slider, state, "layer")
    bind(combo, state, "target")
    fed_back = []
    slider.valueChanged.connect(fed_back.append)
    combo.currentIndexChanged.connect(fed_back.append)
    assert (slider.maximum(), combo.count(), combo.currentText()) == (1, 1, "top-1 prediction")
    with state.batch():
        state.redeclare("layer", range=Range(0, 11))
        state.redeclare("target", choices=(None, 0, 1), labels=("top-1 prediction", "0: ant", "1: bee"))
        state.update(layer=11)
    assert (slider.maximum(), slider.value()) == (11, 11)
    assert [combo.itemText(i) for i in range(combo.count())] == ["top-1 prediction", "0: ant", "1: bee"]
    assert fed_back == []
    combo.setCurrentIndex(2)  # the user picks "1: bee": the state holds the class index
    assert state.target == 1
    state.redeclare("target", choices=(None, 0), labels=("top-1 prediction", "0: digit"))  # a model with one class
    assert state.target is None and combo.currentText() == "top-1 prediction" and combo.count() == 2
    state.redeclare("layer", range=Range(0, 3))  # a shallower model: the slider is back at the default layer
    assert (slider.maximum(), slider.value(), state.layer) == (3, 0, 0)


def test_the_type_map_makes_each_fields_control_and_bind_declares_it(qtbot):
    """One map from a field's spec to its control (gui/common/type_map.py): the control carries no range or choice
    list of its own; bound, it takes the spec's, labels included, and edits the field.

    `control_for` makes a check box, slider, spin boxes, combo and line edit from specs (bool, int as slider, int,
    float, choices, str) with no range or item of their own; bound, each takes its spec's range or labelled choices and
    edits the field.
    """
    from vitstudio.core.fields import Range
    from vitstudio.gui.common.type_map import control_for

    state = ViewState(smooth=FieldSpec(True, bool), layer=FieldSpec(0, int, range=Range(0, 11)),
                      head=FieldSpec(0, int, range=Range(0, 3)), discard=FieldSpec(0.0, float, range=DISCARD),
                      direction=FieldSpec("to", str, choices=("to", "by"), labels=("attends to", "attended by")),
                      text=FieldSpec(None, str))
    made = {name: control_for(spec, title=name, widget="slider" if name == "layer" else None)
            for name, spec in state.fields().items()}
    kinds = {name: type(control).__name__ for name, control in made.items()}
    assert kinds == {"smooth": "QCheckBox", "layer": "QSlider", "head": "QSpinBox", "discard": "QDoubleSpinBox",
                     "direction": "QComboBox", "text": "QLineEdit"}
    assert made["direction"].count() == 0 and made["smooth"].isChecked()  # nothing of its own before the binding
    for name, control in made.items():
        qtbot.addWidget(control)
        bind(control, state, name)
    assert (made["layer"].maximum(), made["head"].maximum(), made["discard"].maximum()) == (11, 3, 0.99)
    assert [made["direction"].itemText(i) for i in range(2)] == ["attends to", "attended by"]
    made["direction"].setCurrentIndex(1)
    made["discard"].setValue(0.5)
    made["text"].setText("a bee")
    made["text"].editingFinished.emit()
    assert (state.direction, state.discard, state.text) == ("by", 0.5, "a bee")


def test_a_kind_registered_in_the_type_map_gets_its_control_and_binds_both_ways(qtbot):
    """The type map is open (magicgui's register_type): a new kind of field — here a colour held as an "#rrggbb"
    string subclass — gets the control registered for it (also for a subclass of that kind), and `bind` keeps that
    control and the field in step both ways; a kind with choices still gets a combo box; unregistered, the kind falls
    back to the map's own entry (a line edit)."""
    from vitstudio.gui.common.type_map import control_for, register, unregister

    class Colour(str):
        pass

    class Accent(Colour):
        pass

    class Swatch:  # a compound control (bind's protocol): a combo of named colours, read as the field's kind
        def __init__(self, title=""):
            self.widget = QComboBox()
            for name, value in (("red", "#ff0000"), ("teal", "#008080")):
                self.widget.addItem(name, value)

        def connect_changed(self, slot):
            self.widget.currentIndexChanged.connect(slot)

        def widgets(self):
            return [self.widget]

        def value(self):
            return Accent(self.widget.currentData())

        def set_value(self, value):
            self.widget.setCurrentIndex(self.widget.findData(str(value)))

    register(Colour, lambda spec, title="": Swatch(title))
    try:
        state = ViewState(accent=FieldSpec(Accent("#ff0000"), kind=Accent))
        box = control_for(state.fields()["accent"])
        assert isinstance(box, Swatch)
        qtbot.addWidget(box.widget)
        bind(box, state, "accent")
        box.widget.setCurrentIndex(1)
        assert state.accent == "#008080" and type(state.accent) is Accent
        state.accent = Accent("#ff0000")
        assert box.widget.currentText() == "red"
        assert type(control_for(FieldSpec("#ff0000", kind=Colour, choices=("#ff0000",)))) is QComboBox
    finally:
        unregister(Colour)
    assert type(control_for(FieldSpec(Colour("#ff0000"), kind=Colour))) is QLineEdit
