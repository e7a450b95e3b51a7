"""Training losses: cross-entropy with label smoothing, soft targets under mixup/cutmix, and class-balanced
weights."""

from __future__ import annotations

import torch
from torch import nn

from vitstudio.core.data.datasets import Split
from vitstudio.core.train.recipes import TrainConfig


class _BalancedSoftTargetCE(nn.Module):
    """Soft-target cross-entropy (mixup/cutmix) with per-class weights: each class counts as much as the others."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weight", weight)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        per_class = -target * torch.log_softmax(logits, dim=-1) * self.weight.to(logits.device)
        return per_class.sum(-1).mean()


def class_weights(split: Split) -> torch.Tensor:
    """N / (C · n_c) for every class c of the training split (1 for all when balanced)."""
    counts = torch.bincount(torch.tensor([label for _, label in split.train]), minlength=len(split.classes)).float()
    return counts.sum() / (len(split.classes) * counts.clamp(min=1))


def loss_fns(config: TrainConfig, split: Split):
    from timm.data import Mixup
    from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy

    num_classes = len(split.classes)
    weight = class_weights(split) if config.balance else None
    if config.mixup or config.cutmix:
        mixup = Mixup(mixup_alpha=config.mixup, cutmix_alpha=config.cutmix, label_smoothing=config.label_smoothing,
                      num_classes=num_classes)
        return mixup, _BalancedSoftTargetCE(weight) if weight is not None else SoftTargetCrossEntropy()
    if weight is not None:  # torch's own CE takes both the class weights and the smoothing
        return None, nn.CrossEntropyLoss(weight=weight, label_smoothing=config.label_smoothing)
    if config.label_smoothing:
        return None, LabelSmoothingCrossEntropy(config.label_smoothing)
    return None, nn.CrossEntropyLoss()
