"""Checking a ViT's size before anything is allocated: valid ranges for every field, and the parameter count and
memory of the configuration estimated in closed form, so an absurd config fails in milliseconds with a message
instead of building for a minute and dying in the allocator."""

from __future__ import annotations

import os

# field -> (lowest, highest) accepted; ViTs in the wild sit well inside these
LIMITS = {"img_size": (8, 8192), "patch_size": (1, 1024), "embed_dim": (8, 16384), "depth": (1, 256),
          "num_heads": (1, 256), "num_classes": (1, 1_000_000), "mlp_ratio": (0.25, 64.0)}
# what timm's vit_base_patch16_224 entry point assumes for fields a config leaves out
DEFAULTS = {"img_size": 224, "patch_size": 16, "embed_dim": 768, "depth": 12, "num_heads": 12, "num_classes": 1000,
            "mlp_ratio": 4.0}


class ModelTooLarge(ValueError):
    """A configuration that is invalid or would not fit this machine; the message gives the valid ranges."""


def _side(value) -> int:
    return int(max(value)) if isinstance(value, (list, tuple)) else int(value)


def check_vit_args(args: dict, source: str, memory_bytes: int | None = None, flat: bool = True
                   ) -> tuple[int, int] | None:
    """Refuse out-of-range fields and configs beyond the machine; returns (parameters, bytes for weights plus one
    image's forward), estimated without building anything. Hierarchical models (`flat=False`: Swin's per-stage
    depths and heads) get the range checks only (None returned): the closed form is a plain ViT's."""
    values = dict(DEFAULTS)
    for key, value in args.items():
        if not flat and isinstance(value, (list, tuple)) and key != "img_size":
            continue
        if key not in LIMITS or value is None:
            continue
        try:
            number = float(_side(value)) if key != "mlp_ratio" else float(value)
        except (TypeError, ValueError):
            raise ModelTooLarge(f"{source}: {key} must be a number, not {value!r}.") from None
        lo, hi = LIMITS[key]
        if not lo <= number <= hi:
            raise ModelTooLarge(f"{source}: {key}={value} is outside the valid range {lo}..{hi}.")
        values[key] = number
    if not flat:
        return None
    img, patch, width = int(values["img_size"]), int(values["patch_size"]), int(values["embed_dim"])
    depth, heads, classes = int(values["depth"]), int(values["num_heads"]), int(values["num_classes"])
    if patch > img or img % patch:
        raise ModelTooLarge(f"{source}: the image size ({img}) must be a multiple of the patch size ({patch}).")
    if width % heads:
        raise ModelTooLarge(f"{source}: the width ({width}) must be a multiple of the number of heads ({heads}).")
    tokens = (img // patch) ** 2 + 1
    hidden = int(width * values["mlp_ratio"])
    per_block = 4 * width * width + 2 * width * hidden + 9 * width + hidden  # qkv + proj + mlp + norms/biases
    params = depth * per_block + 3 * patch * patch * width + tokens * width + width * classes + 4 * width
    # weights (fp32) + the largest activation of one image: an attention matrix per head, and the MLP's hidden
    forward = 4 * (heads * tokens * tokens + tokens * hidden + 4 * tokens * width)
    needed = 4 * params + forward
    budget = memory_bytes if memory_bytes is not None else int(0.8 * physical_memory())
    if needed > budget:
        raise ModelTooLarge(
            f"{source}: this ViT would need about {_gb(needed)} ({params / 1e9:.2f} B parameters, {tokens} tokens "
            f"per image), more than this machine has ({_gb(budget)} usable). Use a smaller image, width or depth.")
    return params, needed


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a large desktop
        return 64 << 30


def _gb(n: int) -> str:
    return f"{n / (1 << 30):,.1f} GB"
