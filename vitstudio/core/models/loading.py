"""Turn what a user names (timm name, hub id, folder, weights file, custom spec) into a LoadedModel.

Accepted specs:
  * `arch[.tag]`             timm architecture; pretrained weights from the HF hub through its cache
  * `hf-hub:org/repo`        a timm model repo on the hub (config.json + weights)
  * `local-dir:DIR`, `DIR`   a timm model folder (config.json + model.safetensors), e.g. under models/
  * a seed folder or file    WZMIAOMIAO vit_model.py checkpoint (+ class_indices.json beside it)
  * `custom:img=224,patch=16,width=192,depth=12,heads=3,classes=10`   a new ViT for training from scratch
  * `open_clip:ARCH[:TAG]`, `open_clip:hf-hub:REPO`, OpenCLIP folders/repos   CLIP-style models (models/openclip.py)
with `weights=FILE` (.safetensors/.pth/.pt/.bin/.npz) for a named or custom architecture.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from pathlib import Path

import timm
import torch
from torch import nn

from vitstudio.core.errors import UserFacingError
from vitstudio.core.files import irregular
from vitstudio.core.models import hub, openclip
from vitstudio.core.models.adapter_checks import is_adapter_folder
from vitstudio.core.models.adapter_folder import load_adapter
from vitstudio.core.models.catalog import (
    WEIGHT_SUFFIXES,
    cached_url_file,
    hub_weight_files,
    model_dirs,
    supported_classes,
    vit_architectures,
)
from vitstudio.core.models.checkpoints import (
    SEED_CROP_PCT,
    SEED_SHAPE_FILE,
    CheckpointError,
    attach_representation_head,
    build_inferred,
    infer_vit,
    load_failure,
    load_into,
    npz_num_classes,
    pair_problem,
    read_class_indices,
    read_seed_heads,
    read_seed_preprocessing,
    read_state_dict,
    set_layer_norm_eps,
)
from vitstudio.core.models.config_check import (
    ConfigError,
    has_config,
    parse_custom,
    read_model_config,
    validate_timm_config,
)
from vitstudio.core.models.devices import resolve_device, resolve_precision, validate_precision
from vitstudio.core.models.hf_transformers import is_transformers_config
from vitstudio.core.models.labels import label_names_problem, resolve_labels
from vitstudio.core.models.model import LoadedModel, ModelParts
from vitstudio.core.models.run_record import unfinished_run_note
from vitstudio.core.models.size_check import check_config_size
from vitstudio.core.models.sizing import ModelTooLarge
from vitstudio.core.models.weights_in_place import built_with_weights

ProgressFn = hub.ProgressFn


class ModelLoadError(UserFacingError):
    """The model could not be loaded; the message says why and what to do."""


def load_model(spec: str, weights: str | Path | None = None, device: str = "auto", precision: str = "auto",
               progress: ProgressFn | None = None, pretrained: bool = True) -> LoadedModel:
    """Load `spec` (see module doc) on `device` in eval mode; raise ModelLoadError with a clear message."""
    try:
        dev = resolve_device(device)
        validate_precision(precision, dev)
        parts = _load(str(spec), Path(weights) if weights else None, progress, pretrained)
    except (CheckpointError, hub.WeightsUnavailable, ValueError) as exc:
        raise ModelLoadError(str(exc)) from None
    parts["model"].eval().to(dev)
    # built once, complete: where it runs and in which precision, with its labels and architecture note
    return LoadedModel(**parts, device=dev, precision=resolve_precision(precision, dev))


def loaded_module(model: nn.Module, name: str, kind: str = "timm", source: str = "built in code") -> LoadedModel:
    """A module built in code, as a LoadedModel on the CPU in fp32 (labels and preprocessing as a load finds them)."""
    return LoadedModel(**_finish(model.eval(), name, kind, source, None, None), device=torch.device("cpu"),
                       precision="fp32")


def _load(spec: str, weights: Path | None, progress: ProgressFn | None, pretrained: bool) -> ModelParts:
    local = _local_path(spec)
    if local is not None and local.suffix.lower() == ".onnx":
        raise ModelLoadError(f"{local.name} is an ONNX export: it runs in ONNX Runtime (its metadata holds the labels "
                             f"and preprocessing), not here, where attention is read from the PyTorch model. Load "
                             f"the run folder or model folder it was exported from.")
    if openclip.is_openclip_spec(spec) or (local is not None and openclip.is_openclip_folder(local)):
        if weights is not None:
            raise ModelLoadError("--weights does not go with an OpenCLIP model (its folder or tag holds them).")
        return openclip.load(spec, progress)
    if spec.startswith("custom:"):
        model = timm.create_model("vit_base_patch16_224", pretrained=False, **parse_custom(spec))
        source = "random initialisation (custom ViT)"
        if weights:
            _load_file_into(model, weights)
            source = str(weights)
        return _finish(model, spec, "custom", source, None, weights.parent if weights else None)
    if weights is not None:
        if spec.startswith(("hf-hub:", "local-dir:")) or local is not None:
            raise ModelLoadError("--weights goes with an architecture name (e.g. vit_base_patch16_224).")
        return _named_with_file(spec, weights)
    if local is not None and is_adapter_folder(local):  # a peft LoRA/DoRA folder: its base model, merged
        parts, info = load_adapter(local, lambda base, w: _load(base, Path(w) if w else None, progress, pretrained))
        return _finish(parts["model"], spec, "timm", f"{local} (adapter on {info.base_model})",
                       info.data_config or parts["data_config"], local)
    if local is not None:
        if local.is_dir() and has_config(local):  # a config.json that is no regular file is refused, not skipped
            return _timm_local_dir(spec, local)
        return _seed(spec, local)
    if spec.startswith("local-dir:"):
        return _timm_local_dir(spec, Path(spec.split(":", 1)[1]))
    if spec.startswith("hf-hub:"):
        return _hf_hub(spec, progress)
    return _timm_pretrained(spec, progress, pretrained)


def local_folder(spec: str) -> Path | None:
    """The folder a spec names on this machine (a path, or a name under models/), if any: e.g. a run folder."""
    path = _local_path(spec)
    if path is None and spec.startswith("local-dir:"):
        path = Path(spec.split(":", 1)[1])
    return path if path is not None and path.is_dir() else None


def may_have_text_tower(spec: str) -> bool:
    """Whether `spec` may be a CLIP-style model with a text tower, known without the network (the Training form
    offers "Start the head from the class names" only then): OpenCLIP specs and folders, and hub repos not cached
    as timm's (an uncached repo may be either); never timm names, custom: ViTs, or other folders and files."""
    spec = spec.strip()
    if openclip.is_openclip_spec(spec):
        return True
    local = _local_path(spec) if spec else None
    if local is not None:
        return openclip.is_openclip_folder(local)
    if spec.startswith("hf-hub:"):
        return hub.cached_hub_file(spec.split(":", 1)[1], ("config.json",)) is None
    return False


def _local_path(spec: str) -> Path | None:
    if ":" in spec.split("/")[0] and not Path(spec).exists():
        return None  # a 'source:' prefix, not a path
    is_timm_name = timm.is_model(spec.split(".", 1)[0])
    for candidate in (Path(spec), *(folder / spec for folder in model_dirs())):
        if candidate.exists():
            if is_timm_name and not _holds_a_model(candidate):
                continue  # e.g. an unrelated empty folder that happens to be named vit_tiny_patch16_224
            return candidate
    return None


def _holds_a_model(path: Path) -> bool:
    """A file, or a folder with a config.json or weights (directly or in weights/, the seed layout)."""
    if path.is_file():
        return True
    try:
        names = [p for folder in (path, path / "weights") if folder.is_dir() for p in folder.iterdir()]
    except OSError:
        return False
    return any(p.name == "config.json" or p.suffix.lower() in WEIGHT_SUFFIXES for p in names)


def _check_arch(name: str) -> str:
    arch = name.split(".", 1)[0]
    if not timm.is_model(arch):
        close = difflib.get_close_matches(arch, vit_architectures(), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else " See `vitstudio models`."
        raise ModelLoadError(f"Unknown model '{name}': not a timm architecture, file or folder.{hint}")
    return arch


def _timm_pretrained(name: str, progress: ProgressFn | None, pretrained: bool) -> LoadedModel:
    arch = _check_arch(name)
    if not pretrained:
        model = timm.create_model(name, pretrained=False)
        return _finish(model, name, "random", "random initialisation", None, None)
    cfg = timm.models.get_pretrained_cfg(name)
    if cfg is None or not (cfg.hf_hub_id or cfg.url):
        raise ModelLoadError(f"'{name}' has no pretrained weights in timm; pick a tag from "
                             f"`vitstudio models --filter {arch}`, or pass --weights FILE.")
    if not cfg.hf_hub_id:  # a few old configs only have a URL: timm fetches it into torch hub's cache
        if cached_url_file(cfg.url) is None and not hub.url_reachable(cfg.url):
            raise ModelLoadError(hub.unavailable_message(name))
        model = timm.create_model(name, pretrained=True)
        return _finish(model, name, "timm", cfg.url, None, None)
    repo, files = hub_weight_files(cfg)
    path = hub.fetch_hub_file(repo, files, name, progress)
    overlay = dict(pretrained_cfg_overlay=dict(file=path))
    model = built_with_weights(name, Path(path), **overlay) or timm.create_model(name, pretrained=True, **overlay)
    return _finish(model, name, "timm", f"hf-hub:{repo} ({path})", None, None)


def _hf_hub(spec: str, progress: ProgressFn | None) -> LoadedModel:
    repo = spec.split(":", 1)[1]
    if openclip.is_openclip_repo(repo):  # open_clip_config.json and no timm config.json
        return openclip.load(spec, progress)
    transformers_dir = _transformers_snapshot(repo, spec, progress)
    if transformers_dir is not None:
        return _transformers_dir(spec, transformers_dir, spec)
    online = hub.hub_reachable()
    if not online and hub.cached_hub_file(repo, ("config.json",)) is None:
        raise ModelLoadError(hub.unavailable_message(spec))
    if online:  # fetch the weights first so the user sees download progress
        path = hub.fetch_hub_file(repo, ("model.safetensors", "pytorch_model.bin"), spec, progress)
        model = built_with_weights(spec, Path(path)) or timm.create_model(spec, pretrained=True)
    else:
        with hub.hub_offline():
            try:
                model = timm.create_model(spec, pretrained=True)
            except Exception as exc:
                raise ModelLoadError(f"{hub.unavailable_message(spec)} ({type(exc).__name__})") from None
    return _finish(model, spec, "timm", spec, None, None)


def _transformers_snapshot(repo: str, spec: str, progress: ProgressFn | None) -> Path | None:
    """The cache folder of a hub repo in transformers' format (config, weights and processor fetched), or None
    when the repo is a timm repo (or its config cannot be read: the timm path then reports the problem)."""
    try:
        config_path = Path(hub.fetch_hub_file(repo, ("config.json",), spec, progress))
        config = json.loads(config_path.read_text())
    except (hub.WeightsUnavailable, ValueError, OSError):
        return None
    if not is_transformers_config(config):
        return None
    hub.fetch_hub_file(repo, ("model.safetensors", "pytorch_model.bin"), spec, progress)
    try:
        hub.fetch_hub_file(repo, ("preprocessor_config.json",), spec, progress)
    except hub.WeightsUnavailable:
        pass  # transformers' defaults then apply
    return config_path.parent


def _timm_local_dir(spec: str, folder: Path) -> LoadedModel:
    if not has_config(folder):
        raise ModelLoadError(f"{folder} has no config.json (a timm model folder needs config.json + weights).")
    config = read_model_config(folder / "config.json")
    if is_transformers_config(config):
        return _transformers_dir(spec, folder, str(folder))
    try:
        check_config_size(validate_timm_config(config, folder / "config.json"), folder / "config.json")
        _check_single_object(config, folder / "config.json")
    except (ConfigError, ModelTooLarge) as exc:
        raise ModelLoadError(str(exc)) from None
    rep = (config.get("vitstudio") or {}).get("representation_size")
    weights = _folder_weights(folder)
    mismatch = pair_problem(config, weights)
    if mismatch:
        raise ModelLoadError(mismatch)
    try:
        if rep:  # a head plain timm cannot express: build the body from the config, attach the head, load strictly
            model = timm.create_model(f"local-dir:{folder.resolve()}", pretrained=False)
            attach_representation_head(model, int(rep))
            if weights is None:
                raise FileNotFoundError(f"no model.safetensors in {folder}")
            model.load_state_dict(read_state_dict(weights))
        else:  # built around its weights where that is exact (weights_in_place.py), else as timm builds it
            name = f"local-dir:{folder.resolve()}"
            model = (weights is not None and built_with_weights(name, weights)) or \
                timm.create_model(name, pretrained=True)
    except CheckpointError:
        raise
    except Exception as exc:  # timm and safetensors raise assorted errors on truncated or mismatched files
        where = f"{weights.name} in {folder}" if weights is not None else str(folder)
        raise ModelLoadError(f"Could not load the model folder {folder} ({where}): {load_failure(exc)}") from None
    eps = (config.get("vitstudio") or {}).get("layer_norm_eps")
    if isinstance(eps, float) and eps > 0:  # e.g. transformers' 1e-12, which timm's arguments cannot carry
        set_layer_norm_eps(model, eps)
    exact = (config.get("vitstudio") or {}).get("hf_size")  # a run fine-tuned from a transformers checkpoint
    data_config = dict(timm.data.resolve_model_data_config(model), hf_size=exact) if exact else None
    return _finish(model, spec, "timm", str(folder), data_config, folder)


def _check_single_object(config: dict, path: Path) -> None:
    """Without 'pretrained_cfg', timm reads the whole file as one (its old single-object layout), where only its
    preprocessing fields may appear: anything else would fail deep inside timm as an unexpected keyword."""
    if "pretrained_cfg" in config:
        return
    allowed = {f.name for f in dataclasses.fields(timm.models.PretrainedCfg)} | {"architecture", "num_features",
                                                                                  "labels"}
    other = sorted(set(config) - allowed)
    if other:
        raise ConfigError(f"{path} has no 'pretrained_cfg' object, so timm reads the whole file as one, where "
                          f"{', '.join(repr(k) for k in other[:4])} cannot appear. A timm model folder's config.json "
                          f"(save_for_hf) keeps the preprocessing in 'pretrained_cfg' beside 'model_args'.")


def _folder_weights(folder: Path) -> Path | None:
    """The weights file timm will pick in a model folder (its own preference order), refused when it is no regular
    file: a link to /dev/zero would be read forever."""
    for name in getattr(timm.models._hub, "_PREFERRED_FILES", ("model.safetensors", "pytorch_model.bin")):
        path = folder / name
        refused = irregular(path, "a model folder's weights")
        if refused:
            raise ModelLoadError(refused)
        if path.is_file():
            return path
    return None


def _transformers_dir(spec: str, folder: Path, source: str) -> LoadedModel:
    """A folder in Hugging Face transformers' format, converted to the matching timm model."""
    from vitstudio.core.models.hf_transformers import TransformersFormatError, build

    try:
        model, data_config, labels = build(folder)
    except (TransformersFormatError, ModelTooLarge, CheckpointError) as exc:
        raise ModelLoadError(str(exc)) from None
    if labels:
        model.pretrained_cfg = {**dict(getattr(model, "pretrained_cfg", {}) or {}), "label_names": labels}
    parts = _finish(model, spec, "transformers", f"{source} (transformers format, converted)", data_config, None)
    if labels:
        parts["label_set"] = "transformers config (id2label)"
    model_type = read_model_config(folder / "config.json")["model_type"]
    parts["architecture"] = f"{parts['architecture']} (from transformers' {model_type})"
    return parts


def _seed(spec: str, path: Path) -> LoadedModel:
    """A seed checkpoint: a weights file, or a folder of them (upstream's `weights/` with one file per epoch:
    the latest epoch is taken), architecture read off its keys, class_indices.json beside it or one folder up
    (upstream writes it in the working directory, beside `weights/`)."""
    # absolute first: for `model-0.pth` run inside weights/, `..` must be the recipe's folder with class_indices.json
    path, note = _seed_weights_file(Path(os.path.abspath(path)))
    state = read_state_dict(path)
    inferred = infer_vit(state)
    heads = read_seed_heads(path.parent)
    if heads is not None:
        if inferred.embed_dim % heads:
            raise CheckpointError(f"{path.parent / SEED_SHAPE_FILE}: {heads} heads do not divide the width "
                                  f"{inferred.embed_dim}.")
        inferred = dataclasses.replace(inferred, num_heads=heads)
    model = build_inferred(inferred)
    load_into(model, state, str(path))
    seed_cfg = dict(input_size=(3, inferred.img_size, inferred.img_size), interpolation="bilinear",
                    mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), crop_pct=SEED_CROP_PCT, crop_mode="center")
    seed_cfg.update(read_seed_preprocessing(path.parent))  # ViT Studio's export: the model's own, not upstream's
    labels_at = next((d for d in (path.parent, path.parent.parent) if (d / "class_indices.json").is_file()),
                     path.parent)
    return _finish(model, spec, "seed", f"{path}{note}", seed_cfg, labels_at)


_EPOCH_FILE = re.compile(r"model-(\d+)\.(pth|pt|bin|safetensors)$")


def _seed_weights_file(path: Path) -> tuple[Path, str]:
    """The weights file a seed folder means, and a note saying which one was picked when there was a choice."""
    if path.is_file():
        return path, ""
    folder = path / "weights" if (path / "weights").is_dir() and not _weight_files(path) else path
    files = _weight_files(folder)
    if len(files) == 1:
        return files[0], ""
    epochs = {int(m.group(1)): f for f in files if (m := _EPOCH_FILE.match(f.name))}
    if epochs and len(epochs) == len(files):  # upstream train.py: model-0.pth ... model-9.pth
        last = max(epochs)
        return epochs[last], f" (the latest of {len(epochs)} epoch checkpoints)"
    found = ", ".join(f.name for f in files) or "none"
    raise ModelLoadError(f"{path} should hold config.json, exactly one weights file, or upstream's model-N.pth "
                         f"epoch files (found: {found}); name the file you mean.")


def _weight_files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in (".pth", ".pt", ".bin", ".safetensors"))


def _named_with_file(name: str, weights: Path) -> LoadedModel:
    _check_arch(name)
    if weights.suffix == ".npz":
        model = timm.create_model(name, pretrained=False, num_classes=npz_num_classes(weights))
        _load_file_into(model, weights)
    else:
        state = read_state_dict(weights)  # read once: its head gives the number of classes
        head = state.get("head.weight")
        model = timm.create_model(name, pretrained=False, num_classes=int(head.shape[0]) if head is not None else 0)
        load_into(model, state, str(weights))
    return _finish(model, name, "timm", str(weights), None, weights.parent)


def _load_file_into(model: nn.Module, weights: Path) -> None:
    if weights.suffix == ".npz":
        try:
            model.load_pretrained(str(weights))  # timm's own JAX .npz converter
        except Exception as exc:
            raise ModelLoadError(f"Could not load JAX weights {weights}: {exc}") from None
    else:
        load_into(model, read_state_dict(weights), str(weights))


def _finish(model: nn.Module, spec: str, kind: str, source: str, data_config: dict | None,
            label_folder: Path | None) -> ModelParts:
    supported = supported_classes()
    if not isinstance(model, supported):
        raise ModelLoadError(f"'{spec}' is a {type(model).__name__}; ViT Studio loads "
                             f"{', '.join(c.__name__ for c in supported)} models.")
    if data_config is None:
        data_config = dict(timm.data.resolve_model_data_config(model))
        embed = getattr(model, "patch_embed", None)
        if getattr(embed, "strict_img_size", False) and getattr(embed, "img_size", None):
            # a model built at another size than its pretrained cfg (custom ViTs) only accepts its own size
            data_config["input_size"] = (3, *embed.img_size)
    labels, label_set = resolve_labels(model, read_class_indices(label_folder) if label_folder else None,
                                       guess_imagenet=kind != "custom")
    arch = {"custom": "custom ViT", "seed": f"ViT seed checkpoint ({type(model).__name__})"}.get(kind) or (
        getattr(model, "pretrained_cfg", {}).get("architecture") or type(model).__name__)
    if label_folder is not None and (label_folder / "config.json").is_file():
        # a saved model built with other sizes than its timm entry point (e.g. a fine-tuned custom ViT)
        args = read_model_config(label_folder / "config.json").get("model_args", {})
        shown = {k: v for k, v in args.items() if k in ("img_size", "patch_size", "embed_dim", "depth", "num_heads")}
        if shown:
            arch += " with " + ", ".join(f"{k}={v}" for k, v in shown.items())
    notes = tuple(filter(None, (unfinished_run_note(label_folder), label_names_problem(model))))
    return dict(model=model, name=spec, architecture=arch, kind=kind, data_config=dict(data_config), labels=labels,
                label_set=label_set, weights_source=source, notes=notes)
