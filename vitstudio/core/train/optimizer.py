"""The run's optimizer, as timm's factory builds it (the engine's and the memory plan's)."""

from __future__ import annotations

import timm.optim
import torch
from torch import nn

from vitstudio.core.train.adapters import unwrap
from vitstudio.core.train.recipes import TrainConfig


def make_optimizer(model: nn.Module, config: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """timm's optimizer factory: parameter groups (no decay on biases/norms unless the recipe says otherwise),
    layer-wise lr decay; fused kernels on CUDA (by default for AdamW/Adam, whose torch implementations have them:
    one kernel per parameter group instead of several per tensor)."""
    fused = config.fused_optimizer
    if fused is None:
        fused = config.opt in ("adamw", "adam")
    return timm.optim.create_optimizer_v2(
        # an adapter run's timm model: its parameter names are the ones layer decay groups by
        unwrap(model), opt=config.opt, lr=config.lr, weight_decay=config.weight_decay, momentum=config.momentum,
        layer_decay=config.layer_decay or None, filter_bias_and_bn=config.filter_bias_and_norm,
        **({"fused": True} if fused and device.type == "cuda" else {}))
