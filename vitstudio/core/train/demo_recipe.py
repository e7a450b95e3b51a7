"""The recipe the bundled demo model is trained with (`vitstudio demo-model`): its small ViT from scratch on the
rendered digits (`models/demo.py` holds the model's shape and data; the training settings live here, on the
training floor)."""

from __future__ import annotations

from pathlib import Path

from vitstudio.core.models.demo import DEMO_SPEC
from vitstudio.core.train.recipes import TrainConfig, make_config


def demo_config(data_dir: str | Path, out_dir: str | Path, epochs: int = 40) -> TrainConfig:
    return make_config(str(data_dir), DEMO_SPEC, str(out_dir), preset="scratch", epochs=epochs, batch_size=64,
                       lr=2e-3, warmup_epochs=3, hflip=0.0, scale=(0.75, 1.0), mean=(0.5, 0.5, 0.5),
                       std=(0.5, 0.5, 0.5), interpolation="bilinear", crop_pct=1.0, seed=0, label_smoothing=0.1,
                       extra={"data_description": "32×32 grey digits"})  # said by the out-of-distribution banner
