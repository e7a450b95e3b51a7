"""The memory plan (core/train/memory_plan.py) beside what a training step really takes, and the figures of the
parameter-efficient presets (issue 34).

    python tests/benchmarks/memory_plan.py [--cases vit_small_patch16_224:full:32 ...] [--device cuda]

1. Trainable parameters and optimizer-state bytes of full / last-blocks / lora on ViT-B/16, L/16, H/14 (exact
   counts, from the plan on the meta device: nothing is allocated).
2. For each case MODEL:PRESET:BATCH[:ckpt], the plan's peak beside the measured one, in a fresh process each: on the
   CPU the peak RSS of two training steps minus the RSS before the model was built (torch's own libraries are not
   the plan's); on a GPU `torch.cuda.max_memory_allocated`. The ratio is plan / measured (goal: within 15 %).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

DEFAULT_CASES = ("vit_small_patch16_224:full:32", "vit_small_patch16_224:full:32:ckpt",
                 "vit_small_patch16_224:lora:32", "vit_base_patch16_224:full:16", "vit_base_patch16_224:lora:16")


def _parse(case: str) -> tuple[str, str, int, bool]:
    """MODEL:PRESET:BATCH[:ckpt] (MODEL may hold colons itself: custom:…) -> (model, preset, batch, checkpointing)."""
    parts = case.split(":")
    ckpt = parts[-1] == "ckpt"
    parts = parts[:-1] if ckpt else parts
    return ":".join(parts[:-2]), parts[-2], int(parts[-1]), ckpt


def _build(model_name: str):
    import timm

    from vitstudio.core.models.config_check import parse_custom

    if model_name.startswith("custom:"):
        return timm.create_model("vit_base_patch16_224", pretrained=False, **{**parse_custom(model_name),
                                                                               "num_classes": 10})
    return timm.create_model(model_name, pretrained=False, num_classes=10)


def _config(model: str, preset: str, batch: int, ckpt: bool, device: str):
    from vitstudio.core.train.recipes import make_config

    return make_config("/nonexistent-data", model, "/nonexistent-run", preset=preset, batch_size=batch,
                       grad_checkpointing=ckpt, device=device, precision="fp32" if device == "cpu" else "auto")


def measure(case: str, device: str) -> dict:
    """One case's real peak: two steps of the engine's own model preparation and optimizer (child process)."""
    import resource

    import torch

    model_name, preset, batch, ckpt = _parse(case)
    config = _config(model_name, preset, batch, ckpt, device)
    dev = torch.device(device)

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    from vitstudio.core.train.adapters import add_adapters, is_adapter_run
    from vitstudio.core.train.model_prep import freeze, set_grad_checkpointing
    from vitstudio.core.train.optimizer import make_optimizer

    if is_adapter_run(config):
        import peft  # noqa: F401 — its import (transformers) is not the run's memory
    before = rss()
    model = _build(model_name).to(dev)
    if config.grad_checkpointing:
        set_grad_checkpointing(model)
    hw = tuple(model.patch_embed.img_size)
    model = add_adapters(model, config, hw) if is_adapter_run(config) else (freeze(model, config) and model)
    optimizer = make_optimizer(model, config, dev)
    x, y = torch.randn(int(batch), 3, *hw, device=dev), torch.randint(0, 10, (int(batch),), device=dev)
    model.train()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    from vitstudio.core.models.devices import autocast, resolve_precision

    cast = autocast(dev, resolve_precision(config.precision, dev))  # the plan's precision: bf16 on a GPU that has it
    started = time.perf_counter()
    for _ in range(2):
        with cast:
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds = (time.perf_counter() - started) / 2
    if dev.type == "cuda":
        peak = torch.cuda.max_memory_allocated(dev) - base + sum(
            p.numel() * p.element_size() for p in model.parameters())
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    return {"measured": peak, "step_s": seconds}


def plan_of(case: str, device: str) -> int:
    from vitstudio.core.train.run_plan import plan_run

    model_name, preset, batch, ckpt = _parse(case)
    return plan_run(_config(model_name, preset, batch, ckpt, device), 10, limit=1 << 50).plan.total


def counts_table() -> None:
    from vitstudio.core.train.run_plan import plan_run

    print("| model | preset | trainable parameters | optimizer state (AdamW) |\n|---|---|---|---|")
    for model in ("vit_base_patch16_224", "vit_large_patch16_224", "vit_huge_patch14_224"):
        for preset in ("full", "last-blocks", "lora"):
            plan = plan_run(_config(model, preset, 1, False, "cpu"), 10, limit=1 << 50).plan
            print(f"| {model} | {preset} | {plan.trainable:,} of {plan.parameters:,} | {plan.optimizer:,} B |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="*", default=list(DEFAULT_CASES))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-counts", action="store_true", help="leave out the table of parameter counts")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.device)))
        return
    if not args.no_counts:
        counts_table()
    print("\n| case | plan | measured | plan / measured | step (s) |\n|---|---|---|---|---|")
    for case in args.cases:
        try:
            planned = plan_of(case, args.device)
        except ValueError as exc:  # e.g. peft missing on this machine
            print(f"| {case} | skipped: {exc} | | | |", flush=True)
            continue
        out = subprocess.run([sys.executable, __file__, "--measure", case, "--device", args.device],
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            print(f"| {case} | {planned / 2**30:.2f} GiB | failed: {out.stderr.strip().splitlines()[-1:]} | | |")
            continue
        got = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {case} | {planned / 2**30:.2f} GiB | {got['measured'] / 2**30:.2f} GiB | "
              f"{planned / got['measured']:.2f} | {got['step_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
