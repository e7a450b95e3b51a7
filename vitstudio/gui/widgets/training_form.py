"""The recipe form of the Training panel: preset + the advanced settings, kept in sync with TrainConfig."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QLineEdit, QSpinBox, QWidget

from vitstudio.core.train.recipes import PRESETS, TrainConfig, make_config

# field -> (label, kind, minimum, maximum, step/decimals)
FIELDS = {
    "epochs": ("Epochs", int, 1, 1000, 1),
    "batch_size": ("Batch size", int, 1, 4096, 1),
    "grad_accum": ("Gradient accumulation", int, 1, 256, 1),
    "lr": ("Learning rate", float, 1e-7, 10.0, 6),
    "weight_decay": ("Weight decay", float, 0.0, 10.0, 6),
    "layer_decay": ("Layer-wise lr decay (0 = off)", float, 0.0, 1.0, 3),
    "warmup_epochs": ("Warmup epochs", float, 0.0, 100.0, 1),
    "label_smoothing": ("Label smoothing", float, 0.0, 0.9, 3),
    "mixup": ("Mixup alpha", float, 0.0, 10.0, 2),
    "cutmix": ("CutMix alpha", float, 0.0, 10.0, 2),
    "drop_path": ("Drop path", float, 0.0, 0.9, 3),
    "ema_decay": ("EMA decay (0 = off)", float, 0.0, 0.99999, 5),
    "patience": ("Early-stopping patience (0 = off)", int, 0, 1000, 1),
    "seed": ("Seed", int, 0, 2**31 - 1, 1),
    "img_size": ("Image size (0 = the model's)", int, 0, 2048, 1),
    "val_ratio": ("Validation ratio", float, 0.01, 0.9, 2),
    # augmentation
    "scale_min": ("Crop area, min", float, 0.01, 1.0, 2),
    "scale_max": ("Crop area, max", float, 0.01, 1.0, 2),
    "hflip": ("Flip probability", float, 0.0, 1.0, 2),
    "color_jitter": ("Colour jitter (0 = off)", float, 0.0, 1.0, 2),
}
SCALE_FIELDS = ("scale_min", "scale_max")


class TrainingFormWidget(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.preset = QComboBox()
        self.preset.addItems(list(PRESETS))
        self.preset.setCurrentText("last-blocks")
        self.precision = QComboBox()
        self.precision.addItems(["auto", "fp32", "bf16", "fp16"])  # auto: bf16 on GPUs that support it
        self.advanced = QGroupBox("Advanced settings")
        self.advanced.setCheckable(True)
        self.advanced.setChecked(False)  # folded: the preset's values are used as they are
        grid = QFormLayout(self.advanced)
        self.inputs: dict[str, QSpinBox | QDoubleSpinBox] = {}
        for name, (label, kind, lo, hi, step) in FIELDS.items():
            box = QSpinBox() if kind is int else QDoubleSpinBox(decimals=step)
            box.setRange(lo, hi)
            if kind is float:
                box.setSingleStep(10 ** -min(step, 3))
            grid.addRow(label, box)
            self.inputs[name] = box
        grid.addRow("Precision (AMP)", self.precision)
        self.randaugment = QLineEdit()
        self.randaugment.setPlaceholderText("off; e.g. rand-m9-mstd0.5-inc1")
        self.balance = QCheckBox("Balance classes")
        self.balance.setToolTip("Class-weighted loss: every class weighs as much as the others, whatever its size")
        self.reuse_head = QCheckBox("Reuse matching head rows")
        self.reuse_head.setToolTip("When every class is named like one of the base model's labels, start the new "
                                   "head from those rows")
        self.split_rule = QComboBox()
        self.split_rule.addItems(["stratified", "upstream"])
        self.split_rule.setToolTip("upstream: the seed recipe's read_split_data (random.sample, seed 0)")
        self.extras = {"RandAugment (timm)": self.randaugment, "": self.balance, " ": self.reuse_head,
                       "Split rule": self.split_rule}
        for label, widget in self.extras.items():
            grid.addRow(label.strip(), widget)
        self.advanced.toggled.connect(self._fold)
        layout = QFormLayout(self)
        layout.addRow("Preset", self.preset)
        layout.addRow(self.advanced)
        self.preset.currentTextChanged.connect(self.load_preset)
        self.load_preset(self.preset.currentText())
        self._fold(False)

    def _fold(self, open_: bool) -> None:
        for widget in [*self.inputs.values(), self.precision, *self.extras.values()]:
            self.advanced.layout().setRowVisible(widget, open_)

    def load_preset(self, preset: str) -> None:
        defaults = make_config("", "", "", preset)
        for name, box in self.inputs.items():
            value = defaults.scale[SCALE_FIELDS.index(name)] if name in SCALE_FIELDS else getattr(defaults, name)
            box.setValue(value or 0)
        self.randaugment.setText(defaults.auto_augment or "")
        self.balance.setChecked(defaults.balance)
        self.reuse_head.setChecked(defaults.reuse_head)
        self.split_rule.setCurrentText(defaults.split_rule)

    def config(self, data_dir: str, model: str, out_dir: str, **extra) -> TrainConfig:
        values = {}
        if self.advanced.isChecked():
            values = {name: box.value() for name, box in self.inputs.items()}  # 0 means "off" (see labels)
            values["scale"] = tuple(sorted(values.pop(name) for name in SCALE_FIELDS))
            values.update(precision=self.precision.currentText(), auto_augment=self.randaugment.text().strip() or None,
                          balance=self.balance.isChecked(), reuse_head=self.reuse_head.isChecked(),
                          split_rule=self.split_rule.currentText())
        return make_config(data_dir, model, out_dir, self.preset.currentText(), **values, **extra)


def describe_scan(scan, copies: dict, excluded: int) -> str:
    """The Training panel's summary of a dataset scan (rich text): classes, sizes, skipped files, exclusions,
    exact copies and class imbalance."""
    (lo_w, lo_h), (hi_w, hi_h) = scan.size_range
    layout = "train/ + val/" if scan.val is not None else "class folders (split automatically)"
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
