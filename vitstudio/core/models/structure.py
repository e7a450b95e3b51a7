"""The shape of a model's trunk: its transformer blocks in forward order and what their attention covers.

Three shapes cover every family in the catalog:
- global (ViT, DeiT, EVA, BEiT, rel-pos, NaFlexViT): `model.blocks`, every token attends to every token;
- CaiT: `model.blocks` attend among patch tokens only (talking heads, no class token yet), then
  `model.blocks_token_only` let the class token alone attend to [class, patches] (class attention);
- Swin: `model.layers[s].blocks` attend inside local windows; each stage halves the grid.
Analyses, freezing and stochastic depth all walk the trunk through here, so a new shape is added in one place.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from torch import nn

GLOBAL, PATCHES, CLASS, WINDOW = "global", "patches", "class", "window"


@dataclass(frozen=True)
class TrunkBlock:
    name: str  # qualified module name, e.g. 'blocks.3', 'blocks_token_only.0', 'layers.2.blocks.5'
    block: nn.Module
    kind: str  # GLOBAL | PATCHES | CLASS | WINDOW: which tokens the block's attention covers
    stage: int = 0  # Swin stage (the grid is halved per stage); 0 elsewhere


def is_windowed(model: nn.Module) -> bool:
    layers = getattr(model, "layers", None)
    return getattr(model, "blocks", None) is None and layers is not None and all(
        hasattr(stage, "blocks") for stage in layers)


def is_class_attention(model: nn.Module) -> bool:
    return getattr(model, "blocks_token_only", None) is not None


def trunk_blocks(model: nn.Module) -> list[TrunkBlock]:
    """Every transformer block in the order the forward runs them."""
    if is_windowed(model):
        return [TrunkBlock(f"layers.{s}.blocks.{j}", block, WINDOW, s)
                for s, stage in enumerate(model.layers) for j, block in enumerate(stage.blocks)]
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        return []
    if is_class_attention(model):
        return ([TrunkBlock(f"blocks.{i}", b, PATCHES) for i, b in enumerate(blocks)]
                + [TrunkBlock(f"blocks_token_only.{i}", b, CLASS) for i, b in enumerate(model.blocks_token_only)])
    return [TrunkBlock(f"blocks.{i}", b, GLOBAL) for i, b in enumerate(blocks)]


def attention_modules(block: nn.Module) -> list[nn.Module]:
    """Modules of `block` whose `attn_drop` input is the attention the block applies to v when `fused_attn` is
    off (modules without a fused path, like CaiT's talking heads and Swin v2's cosine attention, always are).

    Block/ResPostBlock -> [block.attn]; ParallelScalingBlock -> [block]; ParallelThingsBlock -> one per
    parallel branch (their heads are concatenated); DiffAttention -> [attn] (capture combines its two maps).
    """
    found = _attention_modules.get(block)
    if found is None:
        found = [m for m in block.modules()
                 if isinstance(getattr(m, "attn_drop", None), nn.Module) and hasattr(m, "num_heads")]
        _attention_modules[block] = found
    return list(found)


# block -> its attention modules: the GUI asks every registry entry's applicability on every model switch (a few
# hundred walks of the module tree, ~30 ms of the GUI thread); a block's attention modules do not change once it
# is built (adapters such as LoRA wrap the projections inside them). Weak keys: a model let go is not kept.
_attention_modules: weakref.WeakKeyDictionary[nn.Module, list[nn.Module]] = weakref.WeakKeyDictionary()


def heads_of(block: nn.Module) -> int:
    """Attention heads of one block, summed over parallel attention branches."""
    return sum(int(m.num_heads) for m in attention_modules(block)) or 1


def patch_embedding(model: nn.Module) -> nn.Module:
    """The module that turns pixels into patch tokens: `patch_embed`, or NaFlexViT's `embeds` (a linear patch
    projection plus a position table resampled to each image's grid)."""
    embed = getattr(model, "patch_embed", None)
    return embed if embed is not None else model.embeds


def token_stages(model: nn.Module) -> int:
    """How many token layers `forward_intermediates` can return: its blocks (CaiT: its self-attention blocks,
    after which patch tokens no longer change) or, for Swin, its stages."""
    if is_windowed(model):
        return len(model.layers)
    return len(getattr(model, "blocks", ()))


def replace_classifier(model: nn.Module, num_classes: int) -> None:
    """A new classifier for `num_classes` in place of the model's (fine-tuning, an adapter's base model): timm's
    `reset_classifier`, or the output layer alone of a seed model's representation head (head.fc → head.out)."""
    if isinstance(model.head, nn.Sequential) and hasattr(model.head, "out"):
        model.head.out = nn.Linear(model.head.out.in_features, num_classes)
        model.num_classes = num_classes
    else:
        model.reset_classifier(num_classes)
