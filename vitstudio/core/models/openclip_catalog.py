"""Which OpenCLIP models the catalog lists: those whose image tower is a ViT this app analyses.

Importing open_clip takes seconds (it pulls in transformers), too long for every model list, so the listing is
generated once from the installed open_clip into `openclip_models.json` beside this file (`generate`); a test
checks that it still equals what the installed open_clip gives, so an upgrade cannot go unnoticed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

CONFIG_NAME = "open_clip_config.json"
WEIGHT_NAMES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
LISTING = Path(__file__).with_name("openclip_models.json")
_UNMAPPED = ("attentional_pool", "qk_norm", "scaled_cosine_attn", "scale_heads", "scale_attn_inner", "scale_attn",
             "scale_fc", "norm_kwargs", "act_kwargs")


def tower_problem(model_cfg: dict, is_vit_arch: Callable[[str], bool] | None = None) -> str | None:
    """None when the image tower of an OpenCLIP config maps onto a timm ViT, else what it has instead (in words
    that follow the model's name). `is_vit_arch` also checks a timm trunk's architecture (its class is checked
    again once built)."""
    vision = dict(model_cfg.get("vision_cfg") or {})
    timm_name = vision.get("timm_model_name")
    if timm_name:
        if vision.get("timm_pool") in ("abs_attn", "rot_attn"):
            return "pools its image tower with a 2-D attention pool (a CNN tower)"
        if is_vit_arch is not None and not is_vit_arch(timm_name.split(".")[0]):
            return f"has a {timm_name} image tower, which is not in a ViT family"
        return None
    if model_cfg.get("text_cfg", {}).get("hf_model_name") and not vision:
        return "has no image tower config"
    if isinstance(vision.get("layers"), (list, tuple)):
        return "has a ResNet image tower, not a ViT"
    odd = [k for k in _UNMAPPED if vision.get(k)]
    if vision.get("block_type") not in (None, "default"):
        odd.append(f"block_type={vision['block_type']}")
    if vision.get("pool_type", "tok") != "tok":
        odd.append(f"pool_type={vision['pool_type']}")
    if vision.get("pos_embed_type", "learnable") != "learnable":
        odd.append(f"pos_embed_type={vision['pos_embed_type']}")
    return f"has an image tower with {', '.join(odd)}, which has no timm equivalent here" if odd else None


def hub_location(pretrained_cfg: dict) -> tuple[str, tuple[str, ...]]:
    """(repo, weight file names to try) of an OpenCLIP pretrained cfg, whose `hf_hub` is 'org/repo/' or
    'org/repo/file' (as open_clip's `download_pretrained` splits it); ('', ()) without hub weights."""
    hub = (pretrained_cfg.get("hf_hub") or "").strip("/")
    if not hub:
        return "", ()
    parts = hub.split("/")
    named = "/".join(parts[2:]) or pretrained_cfg.get("hf_hub_filename") or ""
    return "/".join(parts[:2]), (named,) if named else WEIGHT_NAMES


def generate(is_vit_arch: Callable[[str], bool]) -> list[dict]:
    """Every pretrained OpenCLIP (architecture, tag) with hub weights and a ViT image tower, from open_clip."""
    import open_clip

    rows = []
    for arch, tag in open_clip.list_pretrained():
        model_cfg = open_clip.get_model_config(arch) or {}
        cfg = open_clip.get_pretrained_cfg(arch, tag) or {}
        repo, files = hub_location(cfg)
        if not repo or tower_problem(model_cfg, is_vit_arch) is not None:
            continue
        sigmoid = model_cfg.get("init_logit_bias") is not None
        rows.append(dict(arch=arch, tag=tag, hf_hub=repo, files=list(files),
                         output="sigmoid" if sigmoid else "softmax"))
    return rows


def write_listing(is_vit_arch: Callable[[str], bool]) -> None:
    LISTING.write_text(json.dumps({"open_clip": _version(), "models": generate(is_vit_arch)}, indent=0) + "\n")


@cache
def listed() -> tuple[dict, ...]:
    """The generated listing (empty when the file is missing: the catalog then simply has no OpenCLIP family)."""
    try:
        return tuple(json.loads(LISTING.read_text())["models"])
    except (OSError, ValueError, KeyError):
        return ()


def _version() -> str:
    from importlib.metadata import version

    return version("open_clip_torch")
