"""The memory plan of one run's settings (core/train/memory_plan.py) against what its device has, and when it will
not fit, the settings that would: gradient checkpointing, bf16, the lora preset, a smaller batch with gradient
accumulation, each planned the same way. `finetune --plan` prints it; the Training form shows it; a run on a GPU
that its plan says cannot fit is refused before it starts."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from vitstudio.core.train.memory_plan import MemoryPlan, device_free, plan_memory, size_text, skeleton
from vitstudio.core.train.recipes import ADAPTER_SCOPES, PRESETS, TrainConfig


@dataclass(frozen=True)
class RunPlan:
    plan: MemoryPlan
    model: str
    scope: str
    limit: int | None  # bytes the run may use
    limit_source: str  # "--memory-limit", "free on cuda:0", ""
    suggestions: tuple[tuple[str, MemoryPlan], ...] = ()

    @property
    def fits(self) -> bool:
        return self.limit is None or self.plan.total <= self.limit

    def lines(self) -> list[str]:
        p = self.plan
        out = [f"Memory plan: {self.model}, scope {self.scope}, batch {p.batch_size}, {p.precision} on {p.device}",
               *p.lines()]
        if self.limit is not None:
            out.append(f"  {self.limit_source:<16} {size_text(self.limit):>10}  "
                       + ("fits" if self.fits else "WILL NOT FIT"))
        if not self.fits:
            out.append("Would fit instead:" if self.suggestions else "Nothing ViT Studio can change makes it fit; "
                                                                      "use a smaller model or a larger device.")
            out += [f"  {what} ({size_text(plan.total)})" for what, plan in self.suggestions]
        return out

    @property
    def refusal(self) -> str:
        """One line for a run that will not fit."""
        then = "; ".join(what for what, _ in self.suggestions[:3]) or "a smaller model or a larger device"
        return (f"This run needs about {size_text(self.plan.total)} and {self.limit_source} is "
                f"{size_text(self.limit or 0)}: it would run out of memory. Would fit: {then}.")


def resolved(config: TrainConfig) -> tuple[str, str]:
    """(device, precision) the run would use; a device not on this machine is planned as named (auto precision
    on a CUDA device: bf16, what every recent GPU runs)."""
    from vitstudio.core.models.devices import resolve_device, resolve_precision

    try:
        device = resolve_device(config.device)
    except ValueError:
        name = config.device
        return name, ("bf16" if config.precision == "auto" and name.startswith("cuda") else
                      "fp32" if config.precision == "auto" else config.precision)
    return str(device), resolve_precision(config.precision, device)


def decoded_bytes(config: TrainConfig, images: int, input_hw: tuple[int, int]) -> int:
    """The cached data path's decoded images (kept on the training device), up to its memory budget."""
    if config.data_path != "cached" or not images:
        return 0
    from vitstudio.core.data.imagecache import short_side_for

    side = short_side_for(max(input_hw))
    return min(images * 3 * side * side, int(config.cache_memory_gb * (1 << 30)))


def plan_run(config: TrainConfig, num_classes: int, images: int = 0, limit: int | None = None,
             base: tuple | None = None) -> RunPlan:
    """The plan of `config` with `num_classes` classes and `images` training images; `limit`: bytes allowed (else
    the device's free memory); `base`: (meta skeleton, input size) when already built."""
    model, input_hw = base or skeleton(config.model, config.weights)
    if config.img_size:
        input_hw = (config.img_size, config.img_size)
    device, precision = resolved(config)
    source = "--memory-limit" if limit is not None else f"free on {device}"
    if limit is None:
        limit = device_free(device)

    def plan(c: TrainConfig, prec: str = precision, unchecked: MemoryPlan | None = None) -> MemoryPlan:
        return plan_memory(model, input_hw, c, num_classes, device, prec, decoded_bytes(c, images, input_hw),
                           unchecked)

    result = plan(config)
    suggestions = () if limit is None or result.total <= limit else _suggestions(config, result, plan, limit, device)
    return RunPlan(result, config.model, config.scope, limit, source if limit is not None else "", tuple(suggestions))


def _suggestions(config: TrainConfig, current: MemoryPlan, plan, limit: int, device: str) -> list:
    """Each change that would make the run fit on its own, with its plan: first those that keep the recipe."""
    out = []
    candidates = []
    if not config.grad_checkpointing:
        candidates.append(("gradient checkpointing on (--grad-checkpointing)", replace(config, grad_checkpointing=True),
                           current.precision, current))  # the same run but checkpointing: what it measured holds
    if current.precision == "fp32" and device.startswith("cuda"):
        candidates.append(("bf16 mixed precision (--precision bf16)", config, "bf16", None))
    if config.scope not in ADAPTER_SCOPES:
        lora = {k: v for k, v in PRESETS["lora"].items() if k in ("scope", "lr")}
        candidates.append(("the lora preset (--preset lora)", replace(config, **lora), current.precision, None))
    for what, changed, precision, unchecked in candidates:
        try:
            planned = plan(changed, precision, unchecked)
        except ValueError:  # e.g. peft missing, or no adapter target in this family: not a suggestion
            continue
        if planned.total <= limit:
            out.append((what, planned))
    batch = _largest_batch(current, limit)
    if batch:
        per_update = config.batch_size * config.grad_accum
        exact = next(d for d in range(batch, 0, -1) if per_update % d == 0)  # the same images per update
        batch = exact if exact * 2 >= batch else math.ceil(per_update / math.ceil(per_update / batch))
        accum = math.ceil(per_update / batch)
        fixed = current.activations - current.per_image * current.batch_size
        out.append((f"batch size {batch} with gradient accumulation {accum} (--batch-size {batch} --grad-accum "
                    f"{accum}: {batch * accum} images per update, as {per_update} now)",
                    replace(current, batch_size=batch, activations=fixed + current.per_image * batch,
                            working=current.working * batch // current.batch_size)))
    return out


def _largest_batch(plan: MemoryPlan, limit: int) -> int:
    """The largest batch below the plan's whose peak fits `limit` (the activations scale with it), or 0."""
    fixed = plan.activations - plan.per_image * plan.batch_size
    per_working = plan.working / plan.batch_size
    for b in range(plan.batch_size - 1, 0, -1):
        smaller = replace(plan, batch_size=b, activations=fixed + plan.per_image * b, working=int(per_working * b))
        if smaller.total <= limit:
            return b
    return 0


def plan_for_dataset(config: TrainConfig, limit: int | None = None, base: tuple | None = None) -> RunPlan:
    """The plan of `config` on its dataset (its classes, and its training images for the decoded cache); the dataset
    is only scanned, nothing is written."""
    from vitstudio.core.data.datasets import scan_dataset, without

    scan = without(scan_dataset(config.data_dir), config.exclude)
    count = sum(len(files) for files in scan.train.values())
    train = count if scan.val is not None else round(count * (1 - config.val_ratio))
    return plan_run(config, len(scan.classes), train, limit, base)


def refuse_what_cannot_fit(config: TrainConfig) -> None:
    """On a GPU, a run its memory plan says cannot fit is refused before anything is loaded, with the settings that
    would fit (core/train/run_plan.py); on the CPU the system's memory (and swap) decide."""
    if not resolved(config)[0].startswith("cuda"):
        return
    try:
        plan = plan_for_dataset(config)
    except Exception:  # noqa: BLE001 — a plan it cannot make (an unusual model) never stops a run: training tells
        return
    if not plan.fits:
        raise ValueError(plan.refusal)
