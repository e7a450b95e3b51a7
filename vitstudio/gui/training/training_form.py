"""The recipe form of the Training panel: the preset, then one control per training setting, generated from
TrainConfig's schema (core/train/schema.py) as the CLI's options are: the common ones on top, the others under
Advanced settings, by section. The dataset, base model, run name and probe image are the panel's own rows.

A preset never rewrites what the user typed: a field whose value differs from what the last preset set is theirs,
and a new preset sets only the others (a note says which were kept, with a link to take the preset's values)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from vitstudio.core.train.recipes import PRESET_DESCRIPTIONS, TrainConfig, make_config
from vitstudio.core.train.schema import SECTIONS, Setting, settings_of

from ..common.bind import bind
from ..viewstate import ViewState

_INT_MAX = 2**31 - 1  # QSpinBox holds a C int
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
        lo, hi = int(lo) + (r is not None and r.lo_open), int(min(hi, _INT_MAX)) - (r is not None and r.hi_open)
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


class TrainingFormWidget(QWidget):
    """Preset + every setting of `schema` (TrainConfig's by default) but the panel's own; `config()` builds the
    TrainConfig. With Advanced settings folded, the advanced ones keep the preset's values.

    `state` holds every setting (a view state of the settings' field specs), each control bound to its field;
    `values()` and `edited()` read the state, a preset writes it."""

    changed = Signal()  # any setting, the preset or the Advanced switch changed

    def __init__(self, parent: QWidget | None = None, schema: tuple[Setting, ...] | None = None) -> None:
        super().__init__(parent)
        self.schema = tuple(s for s in (schema or settings_of(TrainConfig)) if not s.panel)
        self.controls = {s.name: SettingControl(s) for s in self.schema}
        self.state = ViewState(**{s.name: s.spec for s in self.schema})
        self.bindings = {name: bind(control, self.state, name) for name, control in self.controls.items()}
        self.inputs: dict[str, QWidget] = {k: w for c in self.controls.values() for k, w in c.parts.items()}
        self.preset: QComboBox = self.controls["preset"].widget
        self.preset_values: dict = {}  # what the last preset set, as the controls read it back
        self.preset_description = QLabel()
        self.preset_description.setWordWrap(True)
        self.preset_note = QLabel()  # which of the user's values a preset change kept
        self.preset_note.setWordWrap(True)
        self.preset_note.setVisible(False)
        self.preset_note.linkActivated.connect(lambda _link: self.load_preset(self.state.preset, False))
        for i in range(self.preset.count()):
            self.preset.setItemData(i, PRESET_DESCRIPTIONS.get(self.preset.itemText(i), ""), Qt.ToolTipRole)
        self.advanced = QGroupBox("Advanced settings")
        self.advanced.setCheckable(True)
        self.advanced.setChecked(False)  # folded: the preset's values are used as they are
        self.advanced_body = QWidget()
        QVBoxLayout(self.advanced).addWidget(self.advanced_body)
        self._lay_out()
        self.advanced.toggled.connect(self.advanced_body.setVisible)
        self.state.preset = "last-blocks"
        self.load_preset(self.state.preset)
        self.state.events.preset.connect(self.load_preset)
        for control in self.controls.values():  # after its binding: the state has the value when `changed` comes
            control.connect_changed(self._emit_changed)  # (also for text that cannot be read yet)
        self.advanced.toggled.connect(self._emit_changed)
        self.advanced_body.setVisible(False)

    def _emit_changed(self, *_value) -> None:
        self.changed.emit()

    def _lay_out(self) -> None:
        """The common settings on top (the preset with its description first), the others under Advanced settings,
        by section."""
        grid = QFormLayout(self.advanced_body)  # one grid for every section: the columns line up
        grid.setContentsMargins(0, 0, 0, 0)
        # a long label beside a wide field (three spin boxes) goes above it: the column is at most 460 px wide
        grid.setRowWrapPolicy(QFormLayout.WrapLongRows)
        layout = QFormLayout(self)
        for section in [*SECTIONS, *sorted({s.section for s in self.schema} - set(SECTIONS))]:
            rows = [c for c in self.controls.values() if c.setting.section == section]
            for c in rows:
                if not c.setting.advanced:
                    layout.addRow(c.label, c.widget)
                if c.widget is self.preset:
                    layout.addRow(self.preset_description)
                    layout.addRow(self.preset_note)
            if any(c.setting.advanced for c in rows):
                grid.addRow(QLabel(f"<b>{section.capitalize()}</b>"))
                for c in rows:
                    if c.setting.advanced:
                        grid.addRow(c.label, c.widget)
        layout.addRow(self.advanced)

    def follow_base_model(self, spec: str) -> None:
        """Settings that mean something only for CLIP-style base models are greyed out for the others."""
        from vitstudio.core.models.loading import may_have_text_tower

        clip = may_have_text_tower(spec)
        for name in ("text_head", "prompt"):
            control = self.controls.get(name)
            if control is not None:
                control.widget.setEnabled(clip)
                control.widget.setToolTip(control.setting.help if clip else
                                          f"{control.setting.help}. {spec or 'No base model'} has no text tower.")

    def edited(self) -> list[str]:
        """The settings whose value is the user's: not the one the last preset set (or not readable)."""
        return [name for name, before in self.preset_values.items()  # typed wrongly: certainly the user's
                if self.bindings[name].problem or not _same(getattr(self.state, name), before)]

    def load_preset(self, preset: str, keep_edits: bool = True) -> None:
        """Set every setting to `preset`'s value but those the user edited (unless `keep_edits` is False)."""
        kept = self.edited() if keep_edits else []
        defaults = make_config("", "", "", preset)
        values = {name: getattr(defaults, name) for name in self.controls
                  if name != "preset" and hasattr(defaults, name)}
        self.state.update(**{name: value for name, value in values.items() if name not in kept})
        self.preset_values = {name: getattr(self.state, name) if name not in kept else value
                              for name, value in values.items()}
        self.changed.emit()
        self.preset_description.setText(f"<i>{PRESET_DESCRIPTIONS.get(preset, '')}</i>")
        self.preset_note.setVisible(bool(kept))
        if kept:
            labels = ", ".join(self.controls[name].setting.label.lower() for name in kept)
            self.preset_note.setText(f"Kept your {labels}; the other settings follow the {preset} preset. "
                                     f"<a href='preset'>Use the preset's values for all</a>")

    def values(self) -> dict:
        """The settings the form sets: the common ones, and the advanced ones when Advanced settings is open. A
        ValueError names a setting typed wrongly (e.g. a mean with two numbers)."""
        shown = self.advanced.isChecked()
        names = [name for name, c in self.controls.items() if name != "preset" and (shown or not c.setting.advanced)]
        problem = next((self.bindings[name].problem for name in names if self.bindings[name].problem), None)
        if problem:
            raise ValueError(problem)
        return {name: getattr(self.state, name) for name in names}

    def config(self, data_dir: str, model: str, out_dir: str, **extra) -> TrainConfig:
        values = self.values()
        config = make_config(data_dir, model, out_dir, self.state.preset, **values, **extra)
        # make_config keeps the preset's value for a None; here None is a choice ("the model's", "off", "auto")
        return dataclasses.replace(config, **{k: None for k, v in values.items() if v is None})


def _same(a, b) -> bool:
    """Equal, numbers within a spin box's rounding (a preset's 0.875 reads back as 0.875 or 0.88)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


def describe_scan(scan, copies: dict, excluded: int) -> str:
    """The Training panel's summary of a dataset scan (rich text): classes, sizes, skipped files, exclusions,
    exact copies and class imbalance."""
    (lo_w, lo_h), (hi_w, hi_h) = scan.size_range
    layout = "train/ + val/" if scan.val is not None else "class folders, split automatically"  # said in ( )
    text = f"{len(scan.classes)} classes, {scan.total} images ({layout}); sizes {lo_w}×{lo_h} to {hi_w}×{hi_h}."
    if scan.skipped:
        text += f" {len(scan.skipped)} file(s) skipped: " + "; ".join(
            f"{Path(p).name} ({why})" for p, why in scan.skipped[:5]) + ("…" if len(scan.skipped) > 5 else "")
    if scan.too_small:
        text += f" Too small to split: {', '.join(scan.too_small)}."
    if excluded:
        text += f" {excluded} image(s) excluded by the label review (the folder is not changed)."
    if copies:
        text += (f" {len(copies)} files are exact copies of each other ({len(set(copies.values()))} groups): "
                 f"each group stays on one side of the train/val split (the Folder tab finds near-duplicates).")
    imbalance = scan.imbalance_warning()
    if imbalance:
        text += f"<br><b>{imbalance}</b>"
    return text
