"""LoRA and DoRA adapters through peft on a loaded timm model: which layers get them (or why none can), the merged
model every run folder holds, and the adapter folder exactly as peft saves it (`RUN/adapter/`), which
`PeftModel.from_pretrained(timm.create_model(BASE, num_classes=N), DIR)` loads.

peft is the `lora` extra: it requires transformers and accelerate, which the app itself does not need; it is imported
only when an adapter run starts (its import takes seconds)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn

from vitstudio.core.files import atomic_write_bytes, die_at, naming
from vitstudio.core.models.adapter_folder import ADAPTER_DIR, ADAPTER_INFO
from vitstudio.core.models.structure import trunk_blocks
from vitstudio.core.train.recipes import ADAPTER_SCOPES, TrainConfig

HEAD_MODULES = ("head", "head_dist")  # trained in full beside the adapters (peft's modules_to_save)


def is_adapter_run(config: TrainConfig) -> bool:
    return config.scope in ADAPTER_SCOPES


def _peft():
    try:
        import peft
    except ImportError:
        raise ValueError("LoRA and DoRA need peft: pip install 'vitstudio[lora]' (or pip install peft).") from None
    return peft


def target_names(config: TrainConfig) -> list[str]:
    """The adapter targets as given: `--lora-targets qkv proj` or `--lora-targets qkv,proj`."""
    return [t.strip() for item in config.lora_targets for t in item.split(",") if t.strip()]


def target_modules(model: nn.Module, targets: list[str]) -> list[str]:
    """What peft's `target_modules` gets: the short names themselves (timm hub adapters' form, `["qkv"]`) when they
    match only linears inside the blocks, else the full names of those linears (`proj` also names the patch
    embedding's convolution). A ValueError saying which names the blocks' linears have when one matches nothing."""
    if not targets:
        raise ValueError("Give at least one adapter target (--lora-targets), e.g. qkv.")
    blocks = [t.name for t in trunk_blocks(model)]
    if not blocks:
        raise ValueError(f"{type(model).__name__} has no transformer blocks ViT Studio can find, so there is nowhere "
                         f"to put adapters; use another preset.")
    inside: dict[str, list[str]] = {t: [] for t in targets}
    linears: set[str] = set()
    outside = False
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        in_block = any(name.startswith(b + ".") for b in blocks)
        if in_block and isinstance(module, nn.Linear):
            linears.add(leaf)
        if leaf in inside:
            if in_block and isinstance(module, nn.Linear):
                inside[leaf].append(name)
            else:
                outside = True
    missing = [t for t, names in inside.items() if not names]
    if missing:
        raise ValueError(f"{type(model).__name__}'s blocks have no linear layer named {', '.join(missing)}; their "
                         f"linears are {', '.join(sorted(linears)) or 'none'} (--lora-targets).")
    return [n for names in inside.values() for n in names] if outside else list(targets)


def add_adapters(model: nn.Module, config: TrainConfig, input_hw: tuple[int, int]) -> nn.Module:
    """`model` (its new head in place) wrapped by peft: LoRA/DoRA on the targets, the head trained in full, the rest
    frozen. Refused, with the reason, when the model reads a target's weight without calling the layer (BEiT's and
    EVA's qkv with separate q/v biases): the adapter would never be used."""
    peft = _peft()
    lora = peft.LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                           target_modules=target_modules(model, target_names(config)), use_dora=config.scope == "dora",
                           modules_to_save=[m for m in HEAD_MODULES if isinstance(getattr(model, m, None), nn.Module)
                                            and any(True for _ in getattr(model, m).parameters())])
    wrapped = peft.get_peft_model(model, lora)
    wrapped.peft_config["default"].base_model_name_or_path = config.model  # peft reads a transformers name only
    unused = _unused_adapters(wrapped, input_hw)
    if unused:
        named = {n.rsplit(".", 1)[-1] for n in unused}
        blocks = tuple(t.name + "." for t in trunk_blocks(unwrap(wrapped)))
        others = sorted({n.rsplit(".", 1)[-1] for n, m in unwrap(wrapped).named_modules()
                         if isinstance(m, nn.Linear) and n.startswith(blocks)}
                        - named - {"base_layer", "lora_A", "lora_B", "default"})
        raise ValueError(f"{type(model).__name__} uses the weight of {unused[0]} without calling the layer, so an "
                         f"adapter there would never be used ({len(unused)} such layer(s)); pick other targets, "
                         f"e.g. --lora-targets {','.join(others) or 'NAME'}, or another preset.")
    return wrapped


def _unused_adapters(wrapped: nn.Module, input_hw: tuple[int, int]) -> list[str]:
    """The adapted layers one forward never calls."""
    from peft.tuners.lora import LoraLayer

    layers = {name: m for name, m in unwrap(wrapped).named_modules() if isinstance(m, LoraLayer)}
    called: set[str] = set()
    hooks = [m.register_forward_hook(lambda mod, i, o, n=name: called.add(n)) for name, m in layers.items()]
    param = next(unwrap(wrapped).parameters())
    try:
        with torch.no_grad():
            wrapped(torch.zeros(1, 3, *input_hw, device=param.device, dtype=param.dtype))
    finally:
        for hook in hooks:
            hook.remove()
    return sorted(set(layers) - called)


def is_peft(model: nn.Module) -> bool:
    return hasattr(model, "get_base_model") and hasattr(model, "peft_config")


def unwrap(model: nn.Module) -> nn.Module:
    """The timm model inside a peft wrapper (its layers carry the adapters), or the model itself."""
    return model.get_base_model() if is_peft(model) else model


def merged_copy(model: nn.Module) -> nn.Module:
    """A plain timm model with the adapters merged into its weights (`merge_and_unload` on a copy: training goes
    on with the adapters); the model itself when it has none."""
    if not is_peft(model):
        return model
    return copy.deepcopy(model).merge_and_unload()


def save_adapter_folder(model: nn.Module, run_folder: Path, info: dict) -> None:
    """RUN/adapter/ as peft's save_pretrained writes it, with ViT Studio's note (base model, its weights, classes,
    data config) beside it; replaced whole, never half-written: written in a staging folder, then swapped in."""
    target = run_folder / ADAPTER_DIR
    staging = Path(tempfile.mkdtemp(prefix=".staging-adapter-", dir=run_folder))
    try:
        _save_pretrained(model, staging, target)
        atomic_write_bytes(staging / ADAPTER_INFO, json.dumps(info, indent=1).encode())
        atomic_write_bytes(staging / "class_indices.json",  # the labels, as a run folder and the seed layout keep them
                           json.dumps({str(i): c for i, c in enumerate(info["classes"])}, indent=1).encode())
        die_at("before-adapter-swap")
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=".old-adapter-", dir=run_folder))
            os.replace(target, old / ADAPTER_DIR)
        os.replace(staging, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _save_pretrained(model: nn.Module, staging: Path, target: Path) -> None:
    """peft's save_pretrained; a full disk is an OSError naming the adapter's weights (safetensors' writer reports it
    as a SafetensorError quoting "os error 28", which the run's one-line report would not recognise)."""
    from safetensors import SafetensorError

    from vitstudio.core.train.runs import system_error

    try:
        die_at("adapter-save")
        model.save_pretrained(str(staging))
    except OSError as exc:
        raise naming(exc, target / "adapter_model.safetensors") from None
    except SafetensorError as exc:
        raise OSError(*system_error(exc), str(target / "adapter_model.safetensors")) from None
