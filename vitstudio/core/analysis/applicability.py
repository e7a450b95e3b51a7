"""Which registered analyses apply to a given model, and why not when they do not.

Asked before any work starts: the CLI refuses with the reason (exit 2), the GUI greys the method out with the
reason as its tooltip, explain() raises it. Cheap: it inspects the module tree, it runs nothing."""

from __future__ import annotations

from torch import nn

from vitstudio.core.analysis import registry
from vitstudio.core.models.structure import WINDOW, attention_modules, patch_embedding, trunk_blocks


def why_not(model: nn.Module, method: str) -> str | None:
    """None when `method` applies to `model`, else one sentence saying why it does not."""
    analysis = registry.get(method)
    name = type(model).__name__
    if method == "pos-embed" and getattr(getattr(model, "embeds", None), "pos_embed", None) is not None:
        return (f"{name} resamples its position table to each image's own patch grid (variable size and aspect), "
                f"so there is no fixed grid of position embeddings to compare.")
    if method == "pos-embed" and getattr(model, "pos_embed", None) is None:
        return f"{name} has no learned position embedding to show: it encodes positions {_position_scheme(model)}."
    if method == "filters":
        weight = getattr(getattr(patch_embedding(model), "proj", None), "weight", None)
        if weight is None or weight.ndim != 4 or weight.shape[1] != 3:
            return (f"{name}'s patch embedding is not a convolution over RGB pixels (a hybrid stem, or a linear "
                    f"projection of flattened patches).")
    if analysis.group == "attention":
        trunk = trunk_blocks(model)
        if method != "token" and any(t.kind == WINDOW for t in trunk):
            return (f"{name} attends only inside local windows (no class token, no attention across the image), "
                    f"so {analysis.title.lower()} is not defined for it; token maps show each window's attention.")
        blocks = [t.block for t in trunk]
        unreadable = [b for b in blocks if not attention_modules(b)]
        if not blocks or unreadable:
            kind = type(unreadable[0]).__name__ if unreadable else name
            return f"{kind} blocks have no attention module ViT Studio can read."
        if method == "gradient-rollout" and getattr(model, "num_classes", None) == 0:
            return (f"gradient rollout explains a class, and this {name} is headless (no classifier): use rollout, "
                    f"or fine-tune a head on your classes.")
        if method == "gradient-rollout":
            modules = [attention_modules(b) for b in blocks]
            if any(len(m) != 1 or hasattr(m[0], "_compute_lambda") for m in modules):
                return (f"gradient rollout needs one plain attention map per block; {type(blocks[0]).__name__} "
                        f"blocks combine several (parallel or differential attention).")
    return None


def available(model: nn.Module) -> dict[str, str | None]:
    """Every registered analysis -> None (applies) or the reason it does not."""
    return {name: why_not(model, name) for name in registry.REGISTRY}


def _position_scheme(model: nn.Module) -> str:
    if getattr(model, "rope", None) is not None:
        return "with rotary embeddings (RoPE) inside attention"
    names = [n for n, _ in model.named_modules()] + [n for n, _ in model.named_parameters()]
    if any("relative_position" in n or "rel_pos" in n or "cpb_mlp" in n for n in names):
        return "with a relative position bias inside attention"
    return "without a learned table"
