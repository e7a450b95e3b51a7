"""The settings of a training run, named for the Training tab's form: TrainConfig and its schema (one field spec per
setting: label, help, range, section), the presets and their descriptions. Torch-free, as the schema is."""

from __future__ import annotations

from vitstudio.core.train.recipes import PRESET_DESCRIPTIONS, TrainConfig, make_config
from vitstudio.core.train.schema import SECTIONS, Setting, settings_of

__all__ = ["PRESET_DESCRIPTIONS", "SECTIONS", "Setting", "TrainConfig", "make_config", "settings_of"]
