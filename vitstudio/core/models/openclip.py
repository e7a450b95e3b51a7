"""CLIP-style models (CLIP, OpenCLIP's LAION models, SigLIP, ...) with their text tower, through OpenCLIP.

Accepted specs:
  * `open_clip:ARCH[:TAG]`          an OpenCLIP architecture and pretrained tag (default: its first tag)
  * `open_clip:hf-hub:ORG/REPO`     a hub repo in OpenCLIP's layout (open_clip_config.json + weights);
    `hf-hub:ORG/REPO` also lands here when the repo has no timm config.json (loading.py asks `is_openclip_repo`)
  * `open_clip:DIR`, `DIR`          a local folder of the same layout

The image tower becomes the timm ViT every analysis of the app works on: OpenCLIP's own VisionTransformer (an
nn.MultiheadAttention stack, whose attention capture cannot read) is converted to timm's VisionTransformer with
timm's own OpenAI-CLIP converter; a timm-based tower (SigLIP, EVA-CLIP, ...) already is one (`visual.trunk`).
ResNet towers, attentional poolers and custom attention blocks are refused with the reason. The model's head is
the image projection until classes are given (`models.zeroshot.with_classes`); the text tower stays beside it
(`text_side(model)`), outside the vision module so freezing, saving and parameter counts see only the ViT.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from torch import nn

from vitstudio.core.models import hub
from vitstudio.core.models.catalog import cached_hub_file, supported_classes
from vitstudio.core.models.model import LoadedModel, ModelParts
from vitstudio.core.models.openclip_catalog import CONFIG_NAME, WEIGHT_NAMES, hub_location, tower_problem

PREFIX = "open_clip:"
CLIP_ENTRY = "vit_base_patch16_clip_224"  # timm's CLIP image tower; sizes come as arguments


class OpenClipUnsupported(ValueError):
    """The model loads in OpenCLIP but its image tower is not a ViT this app can analyse."""


@dataclass(eq=False)
class TextSide:
    """What zero-shot classification needs besides the image tower."""
    clip: nn.Module  # the OpenCLIP model; its visual tower is dropped (the ViT lives in LoadedModel.model)
    tokenizer: object
    logit_scale: float  # exp of the learned log-scale
    logit_bias: float | None  # SigLIP: probabilities are a sigmoid per class
    templates: tuple[str, ...]  # the model's own prompt templates, or () for OpenCLIP's ImageNet ones
    name: str
    cache: dict = field(default_factory=dict)  # prompts -> (n, D) normalised text embeddings

    @property
    def sigmoid(self) -> bool:
        return self.logit_bias is not None


_text_sides: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def text_side(model: nn.Module) -> TextSide | None:
    """The text tower that belongs to an image tower loaded here, or None (any other model)."""
    return _text_sides.get(model)


def attach_text_side(model: nn.Module, side: TextSide) -> None:
    _text_sides[model] = side


def is_clip_style(loaded: LoadedModel) -> bool:
    return text_side(loaded.model) is not None


# -- which specs are OpenCLIP models ---------------------------------------------------------------------------
def is_openclip_spec(spec: str) -> bool:
    return spec.startswith(PREFIX)


def is_openclip_folder(path: Path) -> bool:
    """A folder in OpenCLIP's layout, and not also a timm folder (config.json wins: it loads through timm)."""
    return path.is_dir() and (path / CONFIG_NAME).is_file() and not (path / "config.json").is_file()


def is_openclip_repo(repo: str) -> bool:
    """A hub repo holding only OpenCLIP's layout. Asked from the cache first; online, one metadata query each."""
    if cached_hub_file(repo, ("config.json",)):
        return False
    if cached_hub_file(repo, (CONFIG_NAME,)):
        return True
    if not hub.hub_reachable():
        return False  # the timm path then gives the usual offline message
    from huggingface_hub import file_exists

    name, _, revision = repo.partition("@")
    try:
        return (file_exists(name, CONFIG_NAME, revision=revision or None)
                and not file_exists(name, "config.json", revision=revision or None))
    except Exception:  # noqa: BLE001 — an unknown or private repo: the timm path reports it
        return False


# -- loading -------------------------------------------------------------------------------------------------------
def load(spec: str, progress: hub.ProgressFn | None = None) -> ModelParts:
    """The parts of `spec` (see module doc), on the CPU in eval mode (load_model places them and builds the
    LoadedModel)."""
    target = spec[len(PREFIX):] if is_openclip_spec(spec) else spec
    if target.startswith("hf-hub:"):
        folder = _hub_folder(target.split(":", 1)[1], spec, progress)
        return _from_folder(spec, folder, f"{target} ({folder})")
    if target.startswith("local-dir:"):
        target = target.split(":", 1)[1]
    if Path(target).is_dir():
        if not (Path(target) / CONFIG_NAME).is_file():
            raise ValueError(f"{target} has no {CONFIG_NAME} (an OpenCLIP folder holds it beside the weights).")
        return _from_folder(spec, Path(target), str(target))
    return _from_tag(spec, target, progress)


def _hub_folder(repo: str, spec: str, progress) -> Path:
    """The cache folder of an OpenCLIP hub repo, config and weights present (fetched once, else a clear error)."""
    config = hub.fetch_hub_file(repo, (CONFIG_NAME,), spec, progress)
    weights = hub.fetch_hub_file(repo, WEIGHT_NAMES, spec, progress)
    if Path(weights).parent != Path(config).parent:
        raise ValueError(f"{spec}: config and weights resolved to different snapshots; load it again.")
    return Path(config).parent


def _from_folder(spec: str, folder: Path, source: str) -> LoadedModel:
    import open_clip

    try:
        doc = json.loads((folder / CONFIG_NAME).read_text())
        model_cfg, preprocess = doc["model_cfg"], doc.get("preprocess_cfg", {})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{folder / CONFIG_NAME} is not an OpenCLIP config ({type(exc).__name__}: {exc}).") from None
    if not any(folder.glob(n) for n in (*WEIGHT_NAMES, "*.safetensors", "*.bin", "*.pth")):
        raise ValueError(f"{folder} holds {CONFIG_NAME} but no weights ({' or '.join(WEIGHT_NAMES)}).")
    _check_vision_cfg(model_cfg, spec)
    clip = _create(open_clip.create_model, f"local-dir:{folder.resolve()}", spec)
    tokenizer = _tokenizer(f"local-dir:{folder.resolve()}", spec)
    templates = tuple(doc.get("zero_shot_templates") or ())  # a model that names its own prompts
    return _assemble(clip, model_cfg, preprocess, tokenizer, spec, source, templates)


def _from_tag(spec: str, target: str, progress) -> LoadedModel:
    import open_clip

    arch, _, tag = target.partition(":")
    model_cfg = open_clip.get_model_config(arch)
    if model_cfg is None:
        raise ValueError(f"Unknown OpenCLIP architecture '{arch}'. See `vitstudio models --family open_clip`.")
    tags = open_clip.list_pretrained_tags_by_model(arch)
    tag = tag or (tags[0] if tags else "")
    cfg = open_clip.get_pretrained_cfg(arch, tag) if tag else {}
    repo, files = hub_location(cfg)
    if not repo:
        known = ", ".join(tags) or "none"
        raise ValueError(f"OpenCLIP has no hub weights for '{arch}:{tag}' (tags: {known}).")
    _check_vision_cfg(model_cfg, spec)
    weights = hub.fetch_hub_file(repo, files, spec, progress)
    clip = _create(partial(open_clip.create_model, pretrained=weights), arch, spec)
    preprocess = {k: cfg[k] for k in ("mean", "std", "interpolation", "resize_mode") if k in cfg}
    tokenizer = _tokenizer(arch, spec)
    return _assemble(clip, model_cfg, preprocess, tokenizer, spec, f"hf-hub:{repo} ({weights})", ())


_BPE_TOKENIZERS: dict[str, object] = {}  # what decides the tokenizer -> one never handed out


def _tokenizer(name: str, spec: str):
    """OpenCLIP's tokenizer for the model; some (SigLIP's) are Hugging Face tokenizers fetched from the hub. CLIP's
    own BPE tokenizer is made once a process for each name and config (reading and indexing its 49k merges took
    ~0.15 s of CPU at every load) and each model gets a copy: the tables shared (only read), its memo its own."""
    import copy

    from open_clip.tokenizer import SimpleTokenizer

    key = _tokenizer_key(name)
    made = _BPE_TOKENIZERS.get(key) if key else None
    if made is None:
        made = _new_tokenizer(name, spec)
        if type(made) is not SimpleTokenizer or not key:
            return made
        _BPE_TOKENIZERS[key] = made
    own = copy.copy(made)
    own.cache = dict(made.cache)
    return own


def _tokenizer_key(name: str) -> str | None:
    """What OpenCLIP makes the tokenizer from: a built-in name, or a `local-dir:` folder's text config (every run
    folder of a model has the same; a folder's may be rewritten between loads); None: unknown, made anew."""
    if not name.startswith("local-dir:"):
        return name
    try:
        config = json.loads((Path(name.removeprefix("local-dir:")) / CONFIG_NAME).read_text(encoding="utf-8"))
        return "local-dir " + json.dumps(config["model_cfg"].get("text_cfg", {}), sort_keys=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _new_tokenizer(name: str, spec: str):
    import open_clip

    try:
        if hub.hub_reachable():
            return open_clip.get_tokenizer(name)
        with hub.hub_offline():
            return open_clip.get_tokenizer(name)
    except Exception as exc:  # noqa: BLE001 — transformers and huggingface_hub raise assorted errors
        if not hub.hub_reachable():
            raise ValueError(f"The tokenizer of '{spec}' is not in the local cache: "
                             f"{hub.unavailable_message(spec)}") from None
        raise ValueError(f"OpenCLIP could not make the tokenizer of '{spec}': {type(exc).__name__}: {exc}") from None


def _create(create, name: str, spec: str) -> nn.Module:
    try:
        with hub.hub_offline():  # everything it needs is on disk now; never let it start a slow retry loop
            return create(name)
    except Exception as exc:  # noqa: BLE001 — OpenCLIP raises assorted errors on bad configs and weights
        raise ValueError(f"OpenCLIP could not build '{spec}': {type(exc).__name__}: {exc}") from None


def _check_vision_cfg(model_cfg: dict, spec: str) -> None:
    """Refuse, before building anything, image towers that are not a ViT with plain attention."""
    problem = tower_problem(model_cfg)
    if problem:
        raise OpenClipUnsupported(f"'{spec}' {problem}; ViT Studio analyses class-token ViT image towers.")


# -- the image tower as a timm ViT ---------------------------------------------------------------------------------
def _assemble(clip: nn.Module, model_cfg: dict, preprocess: dict, tokenizer, spec: str, source: str,
              templates: tuple[str, ...]) -> LoadedModel:
    clip.eval()
    vit, architecture = _image_tower(clip, model_cfg, spec)
    if not isinstance(vit, supported_classes()):
        raise OpenClipUnsupported(f"'{spec}' has a {type(vit).__name__} image tower; ViT Studio loads "
                                  f"{', '.join(c.__name__ for c in supported_classes())} towers.")
    clip.visual = nn.Identity()  # the ViT above is the image tower from now on; no second copy in memory
    bias = getattr(clip, "logit_bias", None)
    side = TextSide(clip, tokenizer, float(clip.logit_scale.detach().exp()),
                    float(bias.detach().flatten()[0]) if bias is not None else None, templates, spec)
    vit.num_classes = 0  # headless until classes are given: the head maps pooled tokens to the CLIP embedding
    attach_text_side(vit, side)
    size = int(getattr(vit.patch_embed, "img_size", (224, 224))[0])
    data_config = _data_config(preprocess, size)
    own = dict(getattr(vit, "pretrained_cfg", None) or {})
    # the timm entry it was built through (what a fine-tuned run's config.json names), not the words shown
    vit.pretrained_cfg = {**own, **data_config, "architecture": own.get("architecture") or architecture}
    kind = "SigLIP-style: sigmoid per class" if side.sigmoid else "CLIP-style: softmax"
    return dict(model=vit.eval(), name=spec, architecture=f"{architecture} image tower (OpenCLIP, {kind})",
                kind="open_clip", data_config=data_config, labels=[], label_set="none (give classes)",
                weights_source=source)


def _image_tower(clip: nn.Module, model_cfg: dict, spec: str) -> tuple[nn.Module, str]:
    """(timm ViT whose forward gives the CLIP image embedding, the architecture in words)."""
    visual = clip.visual
    trunk = getattr(visual, "trunk", None)
    if trunk is not None:  # OpenCLIP's TimmModel: a timm trunk, then its projection
        projection = getattr(visual, "head", None)
        if projection is not None and len(list(projection.children())):
            trunk.head = nn.Sequential(trunk.head, projection)
        return trunk, model_cfg["vision_cfg"]["timm_model_name"]
    vit = _converted_vit(visual, model_cfg, spec)
    patch = vit.patch_embed.patch_size[0]
    return vit, f"ViT-{patch} ({len(vit.blocks)} blocks, width {vit.embed_dim})"


def _converted_vit(visual: nn.Module, model_cfg: dict, spec: str) -> nn.Module:
    """OpenCLIP's VisionTransformer as timm's, weights converted by timm's own OpenAI-CLIP converter. Built through
    timm's CLIP entry point with its sizes as arguments (which timm records), so a run fine-tuned from it names a
    timm architecture and plain `timm.create_model` builds it again."""
    import timm
    from timm.models.vision_transformer import checkpoint_filter_fn

    vision = model_cfg["vision_cfg"]
    width, proj = int(vision.get("width", 768)), getattr(visual, "proj", None)
    size = vision.get("image_size", 224)
    args = dict(img_size=list(size) if isinstance(size, (list, tuple)) else int(size),
                patch_size=int(vision.get("patch_size", 16)), embed_dim=width, depth=int(vision.get("layers", 12)),
                num_heads=width // int(vision.get("head_width", 64)), mlp_ratio=float(vision.get("mlp_ratio", 4.0)),
                num_classes=int(proj.shape[1]) if proj is not None else 0, act_layer=_activation(model_cfg))
    if vision.get("ls_init_value") is not None:
        args["init_values"] = float(vision["ls_init_value"])
    if vision.get("no_ln_pre", False):
        args["pre_norm"] = False
    # the entry's own defaults are OpenCLIP's: class token, token pooling, qkv bias, LayerNorm eps 1e-5
    vit = timm.create_model(CLIP_ENTRY, pretrained=False, **args)
    state = {f"visual.{k}": v for k, v in visual.state_dict().items()}
    state = checkpoint_filter_fn(state, vit)
    state = {k.replace(".ls_1.", ".ls1.").replace(".ls_2.", ".ls2."): v for k, v in state.items()}
    try:
        vit.load_state_dict(state)
    except RuntimeError as exc:
        raise OpenClipUnsupported(f"'{spec}': its image tower does not map onto timm's ViT ({exc}).") from None
    return vit


def _activation(model_cfg: dict) -> str:
    return "quick_gelu" if model_cfg.get("quick_gelu") else "gelu"


def _data_config(preprocess: dict, size: int) -> dict:
    """OpenCLIP's preprocessing as timm's eval transform: resize the shortest side and centre-crop (the default),
    squash, or fit the longest side (timm's 'border')."""
    from open_clip.constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD

    mode = {"shortest": "center", "squash": "squash", "longest": "border"}.get(
        preprocess.get("resize_mode", "shortest"), "center")
    size = int(preprocess.get("size", size)) if not isinstance(preprocess.get("size"), (list, tuple)) else size
    return dict(input_size=(3, size, size), interpolation=preprocess.get("interpolation", "bicubic"),
                mean=tuple(preprocess.get("mean", OPENAI_DATASET_MEAN)),
                std=tuple(preprocess.get("std", OPENAI_DATASET_STD)), crop_pct=1.0, crop_mode=mode)


# -- the text tower ------------------------------------------------------------------------------------------------
def encode_prompts(loaded: LoadedModel, prompts: tuple[str, ...]) -> torch.Tensor:
    """(len(prompts), D) normalised text embeddings, float32 on the model's device; cached per (model, prompts)."""
    side = text_side(loaded.model)
    if side is None:
        raise ValueError(f"{loaded.display_name} has no text tower (load a CLIP-style model through OpenCLIP).")
    key = (str(loaded.device), prompts)
    if key not in side.cache:
        side.clip.to(loaded.device)  # the text tower follows the image tower's device
        tokens = side.tokenizer(list(prompts)).to(loaded.device)
        with torch.inference_mode(), loaded.autocast():
            feats = side.clip.encode_text(tokens).float()
        if len(side.cache) >= 32:  # a few class sets and typed texts; not every keystroke forever
            side.cache.pop(next(iter(side.cache)))
        side.cache[key] = torch.nn.functional.normalize(feats, dim=-1)
    return side.cache[key]
