"""Preparing a loaded base model for fine-tuning: a really new head (or the base model's matching rows), stochastic
depth on any loaded ViT, which parameters train, and the run's data config."""

from __future__ import annotations

import torch
from torch import nn

from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import replace_classifier, trunk_blocks
from vitstudio.core.train.recipes import HEAD_SCOPES, TrainConfig
from vitstudio.core.train.text_head import TextInit


def _classifiers(model: nn.Module) -> list[nn.Linear]:
    """The final Linear layer(s) producing the logits (head, or head.out for seed models; head_dist too)."""
    head = model.head.out if isinstance(model.head, nn.Sequential) and hasattr(model.head, "out") else model.head
    out = [head] + ([model.head_dist] if isinstance(getattr(model, "head_dist", None), nn.Linear) else [])
    return [m for m in out if isinstance(m, nn.Linear)]


def _label_key(name: str) -> str:
    return " ".join(name.lower().replace("_", " ").replace("-", " ").split())


def matching_rows(classes: list[str], base_labels: list[str]) -> list[int] | None:
    """For each class, the base label row with that name (any comma-separated synonym, case and _/- ignored);
    None unless every class is found: the new head then starts from the base model's own classifier."""
    index: dict[str, int] = {}
    for row, label in enumerate(base_labels):
        for synonym in str(label).split(","):
            index.setdefault(_label_key(synonym), row)
    rows = [index.get(_label_key(c)) for c in classes]
    return None if any(r is None for r in rows) else rows


def new_head(model: nn.Module, classes: list[str], base_labels: list[str], seed: int, reuse: bool,
             text: TextInit | None = None) -> str:
    """Replace the classifier by one for `classes`; returns how it was initialised. `text`: the weights of a head
    started from the class names (core/train/text_head.py), which win over the base model's rows.

    A new head is drawn from its own generator (trunc-normal std 0.01, zero bias: upstream's `_init_vit_weights`),
    independent of whatever seed built the base model: with the global RNG, a base model created with the same
    seed got back its old head and fine-tuning to renamed classes learned a permutation."""
    old = [(m.weight.detach().clone(), m.bias.detach().clone() if m.bias is not None else None)
           for m in _classifiers(model)]
    replace_classifier(model, len(classes))
    generator = torch.Generator().manual_seed(0x5EED_4EAD + seed)
    rows = matching_rows(classes, base_labels) if reuse and text is None else None
    for i, layer in enumerate(_classifiers(model)):  # a headless base model (Identity head) has no old rows
        weight, bias = old[i] if i < len(old) else (None, None)
        with torch.no_grad():
            if text is not None:
                layer.weight.copy_(text.weight)
                layer.bias.copy_(text.bias)
            elif rows is not None and weight is not None and weight.shape[1] == layer.in_features:
                layer.weight.copy_(weight[rows])
                if bias is not None and layer.bias is not None:
                    layer.bias.copy_(bias[rows])
            else:
                nn.init.trunc_normal_(layer.weight, std=0.01, generator=generator)
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)
    if text is not None:
        return text.how
    if rows is not None:
        return f"new head started from the base model's rows for {', '.join(classes)}"
    return "new head (random, trunc-normal 0.01)"


def set_drop_path(model: nn.Module, rate: float) -> None:
    """Stochastic depth rising linearly to `rate` over the blocks (as timm builds it), on any loaded ViT."""
    from timm.layers import DropPath

    blocks = [t.block for t in trunk_blocks(model)]
    for i, block in enumerate(blocks):
        p = rate * i / max(1, len(blocks) - 1)
        for name in ("drop_path1", "drop_path2", "drop_path"):
            if hasattr(block, name):
                setattr(block, name, DropPath(p) if p > 0 else nn.Identity())


def set_grad_checkpointing(model: nn.Module) -> None:
    """timm's activation checkpointing of the blocks (recomputed in the backward pass; non-reentrant, so frozen
    inputs still pass gradients to adapters)."""
    if not hasattr(model, "set_grad_checkpointing"):
        raise ValueError(f"{type(model).__name__} has no gradient checkpointing (timm's set_grad_checkpointing).")
    model.set_grad_checkpointing(True)


def freeze(model: nn.Module, config: TrainConfig) -> int:
    """Set requires_grad by scope; returns the number of trainable parameters."""
    head_names = ("head", "head_dist", "fc_norm", "attn_pool")
    last = tuple(t.name + "." for t in trunk_blocks(model)[-config.last_blocks:]) if config.last_blocks else ()
    for name, param in model.named_parameters():
        top = name.split(".")[0]
        if config.scope == "all":
            train = True
        elif config.scope in HEAD_SCOPES:
            train = top in head_names[:2]  # head.fc (pre_logits) is inside `head` for seed models
        else:  # last-blocks: the head, the final norm and the last N blocks
            train = top in head_names or top == "norm" or name.startswith(last)
        param.requires_grad_(train)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def data_config_for(base: LoadedModel, config: TrainConfig) -> dict:
    cfg = dict(base.data_config)
    if config.img_size:
        cfg["input_size"] = (3, config.img_size, config.img_size)
    for key in ("mean", "std", "interpolation", "crop_pct"):
        if getattr(config, key) is not None:
            cfg[key] = getattr(config, key)
    if config.img_size or config.crop_pct is not None:  # a transformers processor's sizes no longer apply
        cfg.pop("hf_size", None)
    return cfg
