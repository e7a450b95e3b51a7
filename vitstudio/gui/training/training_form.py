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
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.evented import Field, ViewState
from vitstudio.app.training_settings import (
    PRESET_DESCRIPTIONS,
    SECTIONS,
    Setting,
    TrainConfig,
    make_config,
    settings_of,
)
from vitstudio.core.files import counted

from ..common.bind import bind
from ..common.type_map import SettingControl


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
        # the settings, and whether the advanced ones are the user's (open) or the preset's (folded)
        self.state = ViewState(advanced=Field(False, bool), **{s.name: s.spec for s in self.schema})
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
        bind(self.advanced, self.state, "advanced")
        self.state.events.advanced.connect(self.advanced_body.setVisible)
        self.state.preset = "last-blocks"
        self.load_preset(self.state.preset)
        self.state.events.preset.connect(self.load_preset)
        for control in self.controls.values():  # after its binding: the state has the value when `changed` comes
            control.connect_changed(self._emit_changed)  # (also for text that cannot be read yet)
        self.state.events.advanced.connect(self._emit_changed)
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
        from vitstudio.app.model_facts import may_have_text_tower

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
        shown = self.state.advanced
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
    layout = ("train/ + val/" if scan.val is not None else  # said in ( ); a labels file has no val/ of its own
              f"{'a labels file' if scan.labels_file is not None else 'class folders'}, split automatically")
    text = f"{len(scan.classes)} classes, {scan.total} images ({layout}); sizes {lo_w}×{lo_h} to {hi_w}×{hi_h}."
    if scan.failed:  # inputs meant to be used (a labels file's rows, unreadable images): named, as a run names them
        text += f" {len(scan.failed)} file(s) cannot be used: " + "; ".join(
            f"{Path(p).name} ({why})" for p, why in scan.failed[:5]) + ("…" if len(scan.failed) > 5 else "")
    if scan.ignored:  # what the folder walk passed over (notes.txt): counted, no failure
        text += f" {len(scan.ignored)} other file(s) are not images or not in a class folder."
    if scan.too_small:
        text += f" Too small to split: {', '.join(scan.too_small)}."
    if excluded:
        text += f" {excluded} image(s) excluded by the label review (the folder is not changed)."
    if copies:
        groups = counted(len(set(copies.values())), "group")
        text += (f" {len(copies)} files are exact copies of each other ({groups}): each group stays on one side "
                 f"of the train/val split (the Folder tab finds near-duplicates).")
    imbalance = scan.imbalance_warning()
    if imbalance:
        text += f"<br><b>{imbalance}</b>"
    return text
