"""The recipe form of the Training panel: preset + the advanced settings, kept in sync with TrainConfig."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QSpinBox, QWidget

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
}


class TrainingFormWidget(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.preset = QComboBox()
        self.preset.addItems(list(PRESETS))
        self.preset.setCurrentText("last-blocks")
        self.precision = QComboBox()
        self.precision.addItems(["fp32", "bf16", "fp16"])
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
        self.advanced.toggled.connect(self._fold)
        layout = QFormLayout(self)
        layout.addRow("Preset", self.preset)
        layout.addRow(self.advanced)
        self.preset.currentTextChanged.connect(self.load_preset)
        self.load_preset(self.preset.currentText())
        self._fold(False)

    def _fold(self, open_: bool) -> None:
        for box in self.inputs.values():
            box.setVisible(open_)
            self.advanced.layout().labelForField(box).setVisible(open_)
        self.precision.setVisible(open_)
        self.advanced.layout().labelForField(self.precision).setVisible(open_)

    def load_preset(self, preset: str) -> None:
        defaults = make_config("", "", "", preset)
        for name, box in self.inputs.items():
            value = getattr(defaults, name)
            box.setValue(value or 0)

    def config(self, data_dir: str, model: str, out_dir: str, **extra) -> TrainConfig:
        values = {}
        if self.advanced.isChecked():
            values = {name: box.value() for name, box in self.inputs.items()}  # 0 means "off" (see labels)
            values["precision"] = self.precision.currentText()
        return make_config(data_dir, model, out_dir, self.preset.currentText(), **values, **extra)
