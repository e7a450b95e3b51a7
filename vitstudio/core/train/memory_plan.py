"""A memory plan before Start: the peak memory of a training step split into weights, gradients, optimizer state,
activations and the backward pass's working memory, for the chosen model, preset, batch size, image size, precision
and device, without allocating the model.

How it is measured, not guessed: the model is built on the meta device and moved to fake tensors (shapes only), then
one forward of batch 1 and one of batch 2 run under `saved_tensors_hooks`, which see every tensor autograd keeps for
the backward pass (parameters left out: they are the weights). The two give the bytes per image and the bytes that do
not grow with the batch (autocast's weight copies). The optimizer takes one step on the fake gradients, and its state
is counted as it is. The peak of a step is then

    weights + optimizer state + the larger of (activations, gradients) + one block's activations

(the backward pass frees the activations as it makes the gradients, and holds one block's worth while it works on
it). With gradient checkpointing the kept activations are the blocks' inputs, which stay until their block's
backward beside the gradients made so far (so both count), and the one block is the one being recomputed."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from vitstudio.core.models.structure import replace_classifier, trunk_blocks
from vitstudio.core.train.adapters import unwrap
from vitstudio.core.train.recipes import TrainConfig

GiB = 1 << 30


@dataclass(frozen=True)
class MemoryPlan:
    parameters: int
    trainable: int
    weights: int  # bytes, parameters and buffers
    gradients: int
    optimizer: int
    activations: int  # kept for the backward pass at this batch size
    working: int  # one block's activations, during the backward pass
    images: int  # decoded images kept on the device (the cached data path)
    batch_size: int
    per_image: int  # activation bytes per image
    device: str
    precision: str

    checkpointing: bool = False

    @property
    def total(self) -> int:
        # checkpointed, the blocks' inputs stay until their block's backward, beside the gradients made so far
        kept = self.activations + self.gradients if self.checkpointing else max(self.activations, self.gradients)
        return self.weights + self.optimizer + kept + self.working + self.images

    def rows(self) -> list[tuple[str, int, str]]:
        """(part, bytes, what it is) for each part of the peak."""
        rows = [("weights", self.weights, f"{self.parameters / 1e6:.1f} M parameters"),
                ("gradients", self.gradients, f"{self.trainable / 1e6:.2f} M trainable"),
                ("optimizer state", self.optimizer, ""),
                ("activations", self.activations, f"batch {self.batch_size}, {size_text(self.per_image)} an image"),
                ("working memory", self.working, "one block, in the backward pass"),
                ("decoded images", self.images, "the cached data path keeps them on the device")]
        return [row for row in rows if row[1] or row[0] != "decoded images"]

    def lines(self) -> list[str]:
        out = [f"  {name:<16} {size_text(value):>10}  {note}".rstrip() for name, value, note in self.rows()]
        kept = "activations + gradients" if self.checkpointing else "the larger of activations and gradients"
        out.append(f"  {'total (peak)':<16} {size_text(self.total):>10}  weights + optimizer + {kept} + working memory"
                   + (" + images" if self.images else ""))
        return out


def size_text(n: float) -> str:
    """2.35 GiB, 310.2 MiB, 0.4 MiB: GiB from one on, MiB below."""
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / (1 << 20):.1f} MiB"


def parse_memory(text: str) -> int:
    """'12GB', '12 GiB', '800MB', '12' (GB) -> bytes; GB and GiB are both 2**30 (as GPU memory is quoted)."""
    value = text.strip().upper().replace(" ", "").removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    unit = value[-1:] if value[-1:] in scale else "G"
    try:
        number = float(value[:-1] if value[-1:] in scale else value)
    except ValueError:
        raise ValueError(f"A memory size looks like 12GB or 800MB, not {text!r}.") from None
    if not number > 0 or not math.isfinite(number):
        raise ValueError(f"A memory size must be positive, not {text!r}.")
    return int(number * scale[unit])


@dataclass(frozen=True)
class _Measured:
    fixed: int  # saved bytes that do not grow with the batch
    per_image: int
    working_per_image: int  # the largest block's saved bytes, per image


def plan_memory(skeleton: nn.Module, input_hw: tuple[int, int], config: TrainConfig, num_classes: int,
                device: str, precision: str, images: int = 0, unchecked: MemoryPlan | None = None) -> MemoryPlan:
    """The plan for training `skeleton` (a model on the meta device, its head still the base model's; left as it is)
    with `config` on `device` in `precision` (fp32, bf16 or fp16); `images`: bytes of decoded images kept there.
    `unchecked`: with checkpointing on, the plan of the same settings and precision with it off, if already made (a
    suggestion to turn it on): its one block's working memory and its optimizer state are this plan's, and are not
    measured again (two forwards and an optimizer step of the model)."""
    import copy

    from torch._subclasses.fake_tensor import FakeTensorMode

    from vitstudio.core.train.adapters import add_adapters, is_adapter_run
    from vitstudio.core.train.model_prep import freeze, set_grad_checkpointing
    from vitstudio.core.train.schema import check_settings

    check_settings(config)  # a plan is of a run that may start: --lora-r 100000000 would allocate 25.6 GB here
    model = copy.deepcopy(skeleton)  # on the meta device: nothing to copy but the structure
    replace_classifier(model, num_classes)
    if tuple(input_hw) != _model_hw(model, input_hw) and hasattr(model, "set_input_size"):
        model.set_input_size(img_size=tuple(input_hw))
    model = model.to("meta")
    if is_adapter_run(config):
        model = add_adapters(model, config, tuple(input_hw))
    else:
        freeze(model, config)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = model.to_empty(device="cpu")
        params = list(model.parameters())
        weights = _unique_bytes([*params, *model.buffers()])
        trainable = [p for p in params if p.requires_grad]
        known = unchecked is not None and config.grad_checkpointing
        if not known:
            measured = _measure(model, input_hw, precision, checkpointing=False)
        if config.grad_checkpointing:
            working = unchecked.working // unchecked.batch_size if known else measured.working_per_image
            set_grad_checkpointing(unwrap(model))
            ckpt = _measure(model, input_hw, precision, checkpointing=True)
            measured = replace(ckpt, working_per_image=working)
        optimizer_bytes = unchecked.optimizer if known else _optimizer_bytes(model, config, input_hw)
    b = config.batch_size
    return MemoryPlan(sum(p.numel() for p in params), sum(p.numel() for p in trainable), weights,
                      _unique_bytes(trainable), optimizer_bytes, measured.fixed + measured.per_image * b,
                      measured.working_per_image * b, images, b, measured.per_image, device, precision,
                      config.grad_checkpointing)


def _model_hw(model: nn.Module, default: tuple[int, int]) -> tuple[int, int]:
    size = getattr(getattr(model, "patch_embed", None), "img_size", None)
    return tuple(size) if size else tuple(default)


def _unique_bytes(tensors) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage._cdata] = storage.nbytes()
    return sum(seen.values())


def _measure(model: nn.Module, input_hw, precision: str, checkpointing: bool) -> _Measured:
    """Saved-for-backward bytes at batch 1 and 2 (fixed part and per image), and the largest block's per image."""
    saved = [_saved_bytes(model, input_hw, b, precision) for b in (1, 2)]
    per_image = max(0, saved[1][0] - saved[0][0])
    fixed = max(0, saved[0][0] - per_image)
    working = max(0, max(saved[1][1], default=0) - max(saved[0][1], default=0)) if not checkpointing else 0
    return _Measured(fixed, per_image, working)


def _saved_bytes(model: nn.Module, input_hw, batch: int, precision: str) -> tuple[int, list[int]]:
    """(bytes autograd keeps for the backward pass of one forward of `batch` images, the same per block)."""
    params = {p.untyped_storage()._cdata for p in model.parameters()}
    kept: dict[int, int] = {}
    per_block: list[int] = []
    blocks = [t.block for t in trunk_blocks(unwrap(model))]

    def pack(t):
        storage = t.untyped_storage()
        if storage._cdata not in params:
            kept[storage._cdata] = storage.nbytes()
        return t

    def before(module, args):
        per_block.append(-sum(kept.values()))

    def after(module, args, output):
        per_block[-1] += sum(kept.values())

    hooks = [h for b in blocks for h in (b.register_forward_pre_hook(before), b.register_forward_hook(after))]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    cast = torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()
    model.train()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), cast:
            model(torch.zeros(batch, 3, *input_hw))
    finally:
        for h in hooks:
            h.remove()
    return sum(kept.values()), per_block


def _optimizer_bytes(model: nn.Module, config: TrainConfig, input_hw) -> int:
    """The optimizer's state after a step on fake gradients, as timm's factory builds it for this run."""
    from vitstudio.core.train.optimizer import make_optimizer

    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        return 0
    if config.opt == "lbfgs":  # the quick preset's head fit (train/head_fit.py), not one of timm's optimizers
        from vitstudio.core.train.head_fit import LBFGS_HISTORY

        return (2 * LBFGS_HISTORY + 3) * 4 * sum(p.numel() for p in trainable)  # pairs, direction, gradients
    for p in trainable:
        p.grad = torch.zeros_like(p)
    optimizer = make_optimizer(model, replace(config, fused_optimizer=False), torch.device("cpu"))
    optimizer.step()
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor) and t.dim()]
    for p in trainable:
        p.grad = None
    return _unique_bytes(state)


def skeleton(spec: str, weights: str | None = None) -> tuple[nn.Module, tuple[int, int]]:
    """The base model on the meta device and its input size: built from its name or config.json without reading
    any weights (timm names, custom: ViTs, timm model and run folders), else loaded on the CPU and moved there."""
    import timm

    from vitstudio.core.models.config_check import has_config, parse_custom
    from vitstudio.core.models.loading import load_model, local_folder

    folder = local_folder(spec)
    name = None
    if spec.startswith("custom:"):
        name, kwargs = "vit_base_patch16_224", parse_custom(spec)
    elif folder is not None and has_config(folder) and not weights and not _special(folder):
        name, kwargs = f"local-dir:{folder.resolve()}", {}
    elif folder is None and not weights and timm.is_model(spec.split(".", 1)[0]):
        name, kwargs = spec, {}
    if name is not None:
        try:
            with torch.device("meta"):
                model = timm.create_model(name, pretrained=False, **kwargs)
            return model, tuple(timm.data.resolve_model_data_config(model)["input_size"][1:])
        except Exception:  # noqa: BLE001 — whatever timm cannot build from the name alone is loaded below
            pass
    loaded = load_model(spec, weights, device="cpu")
    return loaded.model.to("meta"), tuple(loaded.data_config["input_size"][1:])


def _special(folder) -> bool:
    """A folder timm's own config cannot rebuild: transformers' format, or a head plain timm cannot express."""
    from vitstudio.core.models.config_check import read_model_config
    from vitstudio.core.models.hf_transformers import is_transformers_config

    try:
        config = read_model_config(folder / "config.json")
    except Exception:  # noqa: BLE001 — the loader reports a broken config with its own message
        return True
    return is_transformers_config(config) or bool((config.get("vitstudio") or {}).get("representation_size"))


def device_free(device: str) -> int | None:
    """Free memory of `device` now: the GPU's (CUDA's own count), or this machine's available memory for the CPU;
    None where it cannot be read (a device not here, MPS without its counters)."""
    from vitstudio.core.models.devices import resolve_device

    try:
        dev = resolve_device(device)
    except ValueError:
        return None
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    if dev.type == "mps" and hasattr(torch.mps, "recommended_max_memory"):
        return int(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    if dev.type == "cpu":
        import psutil

        return int(psutil.virtual_memory().available)
    return None
