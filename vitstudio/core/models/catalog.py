"""What models exist: timm's ViT-family architectures with their pretrained tags, plus local models.

The ViT family is every timm architecture whose model is a `VisionTransformer` (or subclass). Instantiating
~200 models to check their class takes ~25 s, so we select by the timm module that registers them; a test
instantiates them on the meta device and checks the class, so a timm change cannot go unnoticed.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

import timm
from timm.models import get_pretrained_cfg
from timm.models._registry import _module_to_models, get_deprecated_models

# timm modules whose every entry point builds timm.models.vision_transformer.VisionTransformer or a subclass
# (VisionTransformerDistilled in deit; hybrid and ViTamin stems are still VisionTransformer).
VIT_MODULES = ("vision_transformer", "deit", "vision_transformer_hybrid", "vitamin")

WEIGHT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".npz")


def models_dir() -> Path:
    """The folder of user and project models: $VITSTUDIO_MODELS_DIR, else `models/` beside the package."""
    env = os.environ.get("VITSTUDIO_MODELS_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "models"


@dataclass(frozen=True)
class CatalogEntry:
    name: str  # what `load_model` accepts: 'arch.tag', 'arch', or a local path
    architecture: str
    tag: str  # pretrained tag; '' for an architecture without pretrained weights or a local model
    source: str  # 'timm' or 'local'
    local: bool  # weights available without a network (HF cache or models/)
    hf_hub_id: str = ""
    url: str = ""  # a few old timm configs have only a download URL (torch hub cache)
    num_classes: int = 0


def vit_architectures() -> list[str]:
    """Current architecture names (timm also registers deprecated aliases, some of which no longer build)."""
    names: set[str] = set()
    for module in VIT_MODULES:
        names.update(_module_to_models.get(module, ()))
        names.difference_update(get_deprecated_models(module))
    return sorted(names)


def hub_weight_files(pretrained_cfg) -> tuple[str, tuple[str, ...]]:
    """(repo id, candidate weight filenames in preference order) for a timm pretrained cfg."""
    repo = pretrained_cfg.hf_hub_id or ""
    if pretrained_cfg.hf_hub_filename:
        return repo, (pretrained_cfg.hf_hub_filename,)
    return repo, ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin")


def cached_hub_file(repo_id: str, filenames: tuple[str, ...]) -> str | None:
    """Path of the first of `filenames` present in the huggingface_hub cache, without any network call."""
    from huggingface_hub import try_to_load_from_cache

    repo, _, revision = repo_id.partition("@")
    for filename in filenames:
        found = try_to_load_from_cache(repo, filename, revision=revision or None)
        if isinstance(found, str):
            return found
    return None


def cached_url_file(url: str) -> str | None:
    """Path of a URL download in torch hub's checkpoint cache (where timm puts URL-only weights)."""
    import torch.hub

    path = Path(torch.hub.get_dir()) / "checkpoints" / Path(url.split("?")[0]).name
    return str(path) if url and path.is_file() else None


def is_cached(name: str) -> bool:
    return _cfg_cached(get_pretrained_cfg(name))


def _cfg_cached(cfg) -> bool:
    """Whether a pretrained cfg's weights are on disk (HF cache, or torch hub's cache for URL-only configs)."""
    if cfg is None:
        return False
    if cfg.hf_hub_id:
        return cached_hub_file(*hub_weight_files(cfg)) is not None
    return bool(cfg.url) and cached_url_file(cfg.url) is not None


def local_models(folder: Path | None = None) -> list[CatalogEntry]:
    """Models under `models/`: timm folders (config.json + weights), seed folders, loose weight files."""
    folder = folder or models_dir()
    entries: list[CatalogEntry] = []
    if not folder.is_dir():
        return entries
    for item in sorted(folder.iterdir()):
        if item.name.startswith("."):
            continue
        is_model_dir = item.is_dir() and (
            (item / "config.json").is_file() or any(f.suffix in WEIGHT_SUFFIXES for f in item.iterdir())
        )
        if is_model_dir or (item.is_file() and item.suffix in WEIGHT_SUFFIXES):
            entries.append(CatalogEntry(str(item), item.stem if item.is_file() else item.name, "", "local", True))
    return entries


def list_catalog(pattern: str | None = None, local_only: bool = False, folder: Path | None = None
                 ) -> list[CatalogEntry]:
    """Local models first, then every ViT-family 'arch.tag' (and bare arch without weights), filtered."""
    entries = local_models(folder)
    pretrained = set(timm.list_pretrained())
    for arch in vit_architectures():
        tags = sorted(p for p in pretrained if p.split(".", 1)[0] == arch)
        if not tags:
            entries.append(CatalogEntry(arch, arch, "", "timm", False))
            continue
        for full in tags:
            cfg = get_pretrained_cfg(full)
            url = "" if cfg.hf_hub_id else (cfg.url or "")
            entries.append(CatalogEntry(full, arch, full.split(".", 1)[1], "timm", _cfg_cached(cfg),
                                        cfg.hf_hub_id or "", url, cfg.num_classes or 0))
    if pattern:
        pat = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
        entries = [e for e in entries if fnmatch.fnmatch(e.name.lower(), pat.lower())]
    if local_only:
        entries = [e for e in entries if e.local]
    return entries
