"""Checking a ViT's size before anything is allocated: valid ranges for every field, and the parameter count and
memory of the configuration estimated in closed form, so an absurd config fails in milliseconds with a message
instead of building for a minute and dying in the allocator."""

from __future__ import annotations

import os
import re
from pathlib import Path

# field -> (lowest, highest) accepted; ViTs in the wild sit well inside these
LIMITS = {"img_size": (8, 8192), "patch_size": (1, 1024), "embed_dim": (8, 16384), "depth": (1, 256),
          "num_heads": (1, 256), "num_classes": (1, 1_000_000), "mlp_ratio": (0.25, 64.0)}
# Only to estimate memory when neither the config nor the architecture's name gives a field; a field filled from
# here is never the reason for a refusal (an /8 or /14 model is not a /16 one).
ESTIMATE_FILL = {"img_size": 224, "patch_size": 16, "embed_dim": 768, "depth": 12, "num_heads": 12,
                 "num_classes": 1000, "mlp_ratio": 4.0}
# timm's size words -> (embed_dim, depth, num_heads) of their entry points (vision_transformer.py, eva.py, deit.py)
SIZE_WORDS = {"tiny": (192, 12, 3), "small": (384, 12, 6), "medium": (512, 12, 8), "base": (768, 12, 12),
              "large": (1024, 24, 16), "huge": (1280, 32, 16), "giant": (1408, 40, 16), "gigantic": (1664, 48, 16)}


class ModelTooLarge(ValueError):
    """A configuration that is invalid or would not fit this machine; the message gives the valid ranges."""


def _side(value) -> int:
    return int(max(value)) if isinstance(value, (list, tuple)) else int(value)


def architecture_defaults(architecture: str) -> dict:
    """What timm's entry point of `architecture` builds for the fields a config leaves out, read off timm's naming
    (`vit_large_patch14_dinov2` -> patch 14, 518 px, width 1024, 24 blocks, 16 heads) without importing timm, so the
    check runs before torch loads. Unknown words give no field (nothing is assumed)."""
    name = architecture.split(".", 1)[0].lower()
    words = name.split("_")
    found: dict = {}
    patch = re.search(r"patch(\d+)", name)
    if patch:
        found["patch_size"] = int(patch.group(1))
    sizes = [int(w) for w in words if w.isdigit() and 16 <= int(w) <= 8192]
    if sizes:
        found["img_size"] = sizes[-1]
    elif "dinov2" in words or any(w.startswith("dinov2") for w in words):
        found["img_size"] = 518  # timm's DINOv2 entry points are built for 518 px
    for word in words:
        if word in SIZE_WORDS:
            found["embed_dim"], found["depth"], found["num_heads"] = SIZE_WORDS[word]
            break
    return found


def check_vit_args(args: dict, source: str, memory_bytes: int | None = None, flat: bool = True,
                   architecture: str = "") -> tuple[int, int] | None:
    """Refuse out-of-range fields and configs beyond the machine; returns (parameters, bytes for weights plus one
    image's forward), estimated without building anything. Fields `args` leaves out come from `architecture`'s own
    defaults. Hierarchical models (`flat=False`: Swin's per-stage depths and heads) get the range checks only
    (None returned): the closed form is a plain ViT's."""
    known = architecture_defaults(architecture)
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
        known[key] = number
    if not flat:
        return None
    if {"img_size", "patch_size"} <= known.keys():
        img, patch = int(known["img_size"]), int(known["patch_size"])
        # timm drops a remainder (SigLIP so400m: 384 px in 27 patches of 14), so a multiple is asked only of a
        # config that sets both itself (a custom ViT)
        if patch > img or ({"img_size", "patch_size"} <= args.keys() and img % patch):
            raise ModelTooLarge(f"{source}: the image size ({img}) must be a multiple of the patch size ({patch}).")
    # a size word is only a guess at width and heads, so their ratio is checked when both come from one place
    same_source = ("embed_dim" in args) == ("num_heads" in args)
    if same_source and {"embed_dim", "num_heads"} <= known.keys() and int(known["embed_dim"]) % int(known["num_heads"]):
        raise ModelTooLarge(f"{source}: the width ({int(known['embed_dim'])}) must be a multiple of the number of "
                            f"heads ({int(known['num_heads'])}).")
    values = {**ESTIMATE_FILL, **known}
    img, patch, width = int(values["img_size"]), int(values["patch_size"]), int(values["embed_dim"])
    depth, heads, classes = int(values["depth"]), int(values["num_heads"]), int(values["num_classes"])
    tokens = (img // patch) ** 2 + 1
    hidden = int(width * values["mlp_ratio"])
    per_block = 4 * width * width + 2 * width * hidden + 9 * width + hidden  # qkv + proj + mlp + norms/biases
    params = depth * per_block + 3 * patch * patch * width + tokens * width + width * classes + 4 * width
    # weights (fp32) + the largest activation of one image: an attention matrix per head, and the MLP's hidden
    needed = 4 * params + forward_bytes(tokens, width, heads, hidden)
    check_fits(needed, params, tokens, source, memory_bytes)
    return params, needed


def guessed_fields(args: dict, architecture: str) -> set[str]:
    """The fields the closed form had to fill from ViT-B's: the estimate is then a guess, worth an exact count."""
    known = architecture_defaults(architecture).keys() | {k for k, v in args.items() if v is not None}
    return set(ESTIMATE_FILL) - known - {"num_classes", "mlp_ratio"}


def forward_bytes(tokens: int, width: int, heads: int, hidden: int) -> int:
    """fp32 bytes of the largest activations of one image's forward: attention per head, MLP hidden, residuals."""
    return 4 * (heads * tokens * tokens + tokens * hidden + 4 * tokens * width)


def check_fits(needed: int, params: int, tokens: int, source: str, memory_bytes: int | None = None) -> None:
    budget = memory_bytes if memory_bytes is not None else usable_memory()
    if needed > budget:
        raise ModelTooLarge(
            f"{source}: this ViT would need about {_gb(needed)} ({params / 1e9:.2f} B parameters, {tokens} tokens "
            f"per image), more than this process can use ({_gb(budget)}). Use a smaller image, width or depth.")


def usable_memory() -> int:
    """What this process may still allocate: 80 % of physical memory, capped by its own limits (ulimit -v / -d,
    a cgroup's memory.max as containers and systemd set it) minus what it already uses."""
    budget = int(0.8 * physical_memory())
    vm_size, vm_data = _proc_status_bytes("VmSize"), _proc_status_bytes("VmData")
    for limit_name, used in (("RLIMIT_AS", vm_size), ("RLIMIT_DATA", vm_data)):
        limit = _rlimit(limit_name)
        if limit is not None:
            budget = min(budget, max(0, limit - used))
    cgroup = _cgroup_headroom()
    if cgroup is not None:
        budget = min(budget, cgroup)
    return budget


def _rlimit(name: str) -> int | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(getattr(resource, name))
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _proc_status_bytes(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cgroup_headroom() -> int | None:
    """memory.max - memory.current of this process's cgroup (v2), or None without a limit."""
    try:
        rel = Path("/proc/self/cgroup").read_text().strip().splitlines()[-1].split(":", 2)[2]
        folder = Path("/sys/fs/cgroup") / rel.lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((folder / "memory.current").read_text()))
    except (OSError, ValueError, IndexError):
        return None


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume a large desktop
        return 64 << 30


def _gb(n: int) -> str:
    return f"{n / (1 << 30):,.1f} GB"
