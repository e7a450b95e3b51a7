"""Play mode: a video file or a camera through the model, frame by frame, with an attention map on top.

Importable without torch (the CLI builds its `--method` choices from `play_methods`)."""

from vitstudio.core.analysis import registry


def play_methods() -> tuple[str, ...]:
    """The registered maps play can draw live: attention entries that need an image, take no parameter without a
    default (a patch, a text) and draw over the crop (a per-head stack is averaged over heads)."""
    return tuple(a.name for a in registry.REGISTRY.values()
                 if a.group == "attention" and a.needs_image and not a.folder
                 and a.renderer in ("overlay", "mosaic") and not any(p.required for p in a.params))
