"""Which registered analyses apply to a given model, and why not when they do not.

Asked before any work starts: the CLI refuses with the reason (exit 2), the GUI greys the method out with the
reason as its tooltip, explain() raises it. Cheap: it inspects the module tree, it runs nothing.

Each registry entry lists the checks below that it needs (`Analysis.applies`); a check takes the model and the
entry and returns None or one sentence saying why the analysis does not apply."""

from __future__ import annotations

from torch import nn

from vitstudio.core.analysis import registry
from vitstudio.core.models.structure import WINDOW, attention_modules, patch_embedding, trunk_blocks


def why_not(model: nn.Module, method: str) -> str | None:
    """None when `method` applies to `model`, else one sentence saying why it does not."""
    return registry.get(method).why_not(model)


def available(model: nn.Module) -> dict[str, str | None]:
    """Every registered analysis -> None (applies) or the reason it does not."""
    return {name: why_not(model, name) for name in registry.REGISTRY}


# -- the checks entries name -------------------------------------------------------------------------------
def fixed_position_table(model: nn.Module, analysis) -> str | None:
    """A learned position embedding on a fixed patch grid."""
    name = type(model).__name__
    if getattr(getattr(model, "embeds", None), "pos_embed", None) is not None:
        return (f"{name} resamples its position table to each image's own patch grid (variable size and aspect), "
                f"so there is no fixed grid of position embeddings to compare.")
    if getattr(model, "pos_embed", None) is None:
        return f"{name} has no learned position embedding to show: it encodes positions {_position_scheme(model)}."
    return None


def rgb_convolution_stem(model: nn.Module, analysis) -> str | None:
    """A patch embedding that is a convolution over RGB pixels."""
    weight = getattr(getattr(patch_embedding(model), "proj", None), "weight", None)
    if weight is None or weight.ndim != 4 or weight.shape[1] != 3:
        return (f"{type(model).__name__}'s patch embedding is not a convolution over RGB pixels (a hybrid stem, or a "
                f"linear projection of flattened patches).")
    return None


def global_attention(model: nn.Module, analysis) -> str | None:
    """Attention across the whole image (not only inside local windows)."""
    if any(t.kind == WINDOW for t in trunk_blocks(model)):
        return (f"{type(model).__name__} attends only inside local windows (no class token, no attention across the "
                f"image), so {analysis.title.lower()} is not defined for it; token maps show each window's attention.")
    return None


def readable_attention(model: nn.Module, analysis) -> str | None:
    """Every trunk block has an attention module whose map can be captured."""
    blocks = [t.block for t in trunk_blocks(model)]
    unreadable = [b for b in blocks if not attention_modules(b)]
    if not blocks or unreadable:
        kind = type(unreadable[0]).__name__ if unreadable else type(model).__name__
        return f"{kind} blocks have no attention module ViT Studio can read."
    return None


def has_classifier(model: nn.Module, analysis) -> str | None:
    """A classifier head, for analyses that explain a class."""
    if getattr(model, "num_classes", None) == 0:
        return (f"{analysis.title.lower()} explains a class, and this {type(model).__name__} is headless (no "
                f"classifier): use rollout, or fine-tune a head on your classes.")
    return None


def plain_attention(model: nn.Module, analysis) -> str | None:
    """One plain attention map per block (gradients are taken with respect to it)."""
    blocks = [t.block for t in trunk_blocks(model)]
    modules = [attention_modules(b) for b in blocks]
    if any(len(m) != 1 or hasattr(m[0], "_compute_lambda") for m in modules):
        return (f"{analysis.title.lower()} needs one plain attention map per block; {type(blocks[0]).__name__} "
                f"blocks combine several (parallel or differential attention).")
    return None


def _position_scheme(model: nn.Module) -> str:
    if getattr(model, "rope", None) is not None:
        return "with rotary embeddings (RoPE) inside attention"
    names = [n for n, _ in model.named_modules()] + [n for n, _ in model.named_parameters()]
    if any("relative_position" in n or "rel_pos" in n or "cpb_mlp" in n for n in names):
        return "with a relative position bias inside attention"
    return "without a learned table"
