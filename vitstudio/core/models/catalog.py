"""What models exist: timm's Vision Transformer families with their pretrained tags, plus local models.

A family is a timm module whose every entry point builds one model class: plain ViTs (`VisionTransformer` and
subclasses: DeiT, hybrids, ViTamin), `Eva` (EVA-02, DINOv3, Perception Encoder, EVA-CLIP: RoPE, registers),
`Beit` (relative position bias), `VisionTransformerRelPos`, `Cait` (talking heads, then class attention) and
Swin v1/v2 (attention inside windows; `core/models/structure.py` says how each trunk is shaped). Instantiating
hundreds of models to check their class takes long, so we select by the registering module; a test instantiates
every catalog architecture on the meta device and checks the class, so a timm change cannot go unnoticed.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import timm
from timm.models import get_pretrained_cfg
from timm.models._registry import _module_to_models, get_deprecated_models

from vitstudio.core import files

# timm module -> (family key for --family, the class every entry point of that module builds)
FAMILIES = {
    "vision_transformer": ("vit", "timm.models.vision_transformer.VisionTransformer"),
    "deit": ("deit", "timm.models.vision_transformer.VisionTransformer"),  # incl. VisionTransformerDistilled
    "vision_transformer_hybrid": ("hybrid", "timm.models.vision_transformer.VisionTransformer"),
    "vitamin": ("vitamin", "timm.models.vision_transformer.VisionTransformer"),
    "eva": ("eva", "timm.models.eva.Eva"),  # EVA-02, EVA-CLIP, DINOv3, Perception Encoder
    "beit": ("beit", "timm.models.beit.Beit"),
    "vision_transformer_relpos": ("relpos", "timm.models.vision_transformer_relpos.VisionTransformerRelPos"),
    "cait": ("cait", "timm.models.cait.Cait"),  # talking-heads self-attention, then class attention
    "swin_transformer": ("swin", "timm.models.swin_transformer.SwinTransformer"),  # windowed attention
    "swin_transformer_v2": ("swin", "timm.models.swin_transformer_v2.SwinTransformerV2"),
    "naflexvit": ("naflexvit", "timm.models.naflexvit.NaFlexVit"),  # position table resampled per image grid
}

WEIGHT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".npz")


def models_dir() -> Path:
    """The folder of the user's models and runs: $VITSTUDIO_MODELS_DIR, else `models/` in the user data folder."""
    return files.models_dir()


def model_dirs() -> list[Path]:
    """Every folder models are listed from: the user's first, then a source checkout's `models/` (read-only)."""
    return [models_dir(), *files.extra_model_dirs()]


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
    family: str = ""


def supported_classes() -> tuple[type, ...]:
    """The model classes ViT Studio loads, explains and fine-tunes."""
    import importlib

    out = []
    for _, path in FAMILIES.values():
        module, _, name = path.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        if cls not in out:
            out.append(cls)
    return tuple(out)


def family_of(arch: str) -> str:
    for module, (family, _) in FAMILIES.items():
        if arch in _module_to_models.get(module, ()):
            return family
    return ""


def vit_architectures(family: str | None = None) -> list[str]:
    """Current architecture names (timm also registers deprecated aliases, some of which no longer build),
    optionally of one family (a key of FAMILIES: vit, deit, hybrid, vitamin, eva, beit, relpos, cait, swin,
    naflexvit)."""
    keys = {key for key, _ in FAMILIES.values()}
    if family and family.lower() not in keys:
        raise ValueError(f"Unknown family '{family}'; use one of {', '.join(sorted(keys))}.")
    names: set[str] = set()
    for module, (key, _) in FAMILIES.items():
        if family and family.lower() != key:
            continue
        names.update(_module_to_models.get(module, ()))
        names.difference_update(get_deprecated_models(module))
    names = {n for n in names if not n.startswith("test_")}  # timm's own tiny test configs
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


def _cfg_cached(cfg, hub_folders: set[str] | None = None) -> bool:
    """Whether a pretrained cfg's weights are on disk (HF cache, or torch hub's cache for URL-only configs).
    `hub_folders` (the cache's repo folders, listed once by the caller) skips the file lookups of repos that have
    none: a catalog of ~1,500 tags made ~5,000 of them per listing, ~0.2 s at every window build."""
    if cfg is None:
        return False
    if cfg.hf_hub_id:
        if hub_folders is not None and _hub_folder(cfg.hf_hub_id) not in hub_folders:
            return False
        return cached_hub_file(*hub_weight_files(cfg)) is not None
    return bool(cfg.url) and cached_url_file(cfg.url) is not None


def _hub_folder(repo_id: str) -> str:
    """huggingface_hub's cache folder name for a repo (`models--org--name`)."""
    return "models--" + repo_id.partition("@")[0].replace("/", "--")


def _hub_cache_folders() -> set[str]:
    from huggingface_hub import constants

    try:
        return set(os.listdir(constants.HF_HUB_CACHE))
    except OSError:  # no cache yet
        return set()


@functools.cache
def _registered_cfg(name: str):
    """timm's pretrained cfg of a registered 'arch.tag' (a deep copy per call in timm; the registry is fixed)."""
    return get_pretrained_cfg(name)


OPENCLIP_FAMILY = "open_clip"


def openclip_entries() -> list[CatalogEntry]:
    """CLIP-style models with their text tower, through OpenCLIP (models/openclip.py): `open_clip:ARCH:TAG`."""
    from vitstudio.core.models.openclip_catalog import listed

    out = []
    for row in listed():
        files = tuple(row["files"])
        out.append(CatalogEntry(f"open_clip:{row['arch']}:{row['tag']}", row["arch"], row["tag"], "open_clip",
                                cached_hub_file(row["hf_hub"], files) is not None, row["hf_hub"],
                                family=OPENCLIP_FAMILY))
    return out


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


def list_catalog(pattern: str | None = None, local_only: bool = False, folder: Path | None = None,
                 family: str | None = None) -> list[CatalogEntry]:
    """Local models first, then every 'arch.tag' of the supported families (and bare arch without weights),
    filtered by name pattern and family."""
    entries = [] if family else [e for f in ([folder] if folder else model_dirs()) for e in local_models(f)]
    tags_of: dict[str, list[str]] = {}  # arch -> its 'arch.tag' names, grouped once (not a scan per arch)
    for full in sorted(set(timm.list_pretrained())):
        tags_of.setdefault(full.split(".", 1)[0], []).append(full)
    hub_folders = _hub_cache_folders()
    for arch in (vit_architectures(family) if family != OPENCLIP_FAMILY else ()):
        fam = family_of(arch)
        tags = tags_of.get(arch, [])
        if not tags:
            entries.append(CatalogEntry(arch, arch, "", "timm", False, family=fam))
            continue
        for full in tags:
            cfg = _registered_cfg(full)
            url = "" if cfg.hf_hub_id else (cfg.url or "")
            entries.append(CatalogEntry(full, arch, full.split(".", 1)[1], "timm", _cfg_cached(cfg, hub_folders),
                                        cfg.hf_hub_id or "", url, cfg.num_classes or 0, fam))
    if family in (None, OPENCLIP_FAMILY):
        entries += openclip_entries()
    if pattern:
        pat = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
        entries = [e for e in entries if fnmatch.fnmatch(e.name.lower(), pat.lower())]
    if local_only:
        entries = [e for e in entries if e.local]
    return entries
