"""Benchmark: fine-tuning throughput, side by side in one run, with ratios.

    python tests/benchmarks/finetune.py [--model custom:…] [--images 96] [--batch 16] [--device auto]
                                        [--precision fp32|bf16] [--epochs 3]
    python tests/benchmarks/finetune.py --quick [--probe-epochs 10]   (the quick preset against linear-probe on
                                        the digits with the demo model: finetune_quick.py)

1. ceiling   — the training step on synthetic tensors already on the device (same model, batch, precision);
2. reference — a timm train.py-style loop: PIL + timm create_transform(is_training=True) + DataLoader with all cores;
3. engine    — ViT Studio's fine_tune on the same JPEG folder: epoch 1 (incl. decoding into the cache) and
               epochs >= 2 (from the cache, augmented on the device).
Goals (GPU): engine epoch >= 2 at >= 0.9x the ceiling and >= 1.7x the reference. Random weights throughout.
The JPEG folder (500x375 photos from scikit-image, 4 classes) is made in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

DEFAULT_MODEL = "custom:img=224,patch=16,width=192,depth=12,heads=3,classes=4"  # ViT-Ti/16 shape


def make_jpegs(root: Path, n: int) -> Path:
    import numpy as np
    from PIL import Image
    from skimage import data

    rng = np.random.default_rng(0)
    sources = [Image.fromarray(getattr(data, name)()).convert("RGB") for name in ("astronaut", "chelsea", "coffee",
                                                                               "rocket")]
    for i in range(n):
        cls = i % 4
        src = sources[cls]
        w, h = src.size
        box = rng.integers(0, 60, 2)
        img = src.crop((int(box[0]), int(box[1]), w - 30, h - 30)).resize((500, 375))
        folder = root / f"class{cls}"
        folder.mkdir(parents=True, exist_ok=True)
        img.save(folder / f"{i:05d}.jpg", quality=90)
    return root


def train_step_fn(loaded, precision_ctx, lr=1e-4, channels_last=False, compile=False, fused=False):
    import timm.optim
    import torch

    model = loaded.model.train()
    opt = timm.optim.create_optimizer_v2(model, opt="adamw", lr=lr, weight_decay=0.05,
                                         **({"fused": True} if fused else {}))
    loss_fn = torch.nn.CrossEntropyLoss()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    run = torch.compile(model) if compile else model

    def step(x, y):
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with precision_ctx():
            loss = loss_fn(run(x).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def ceiling(args, loaded, **switches) -> float:
    import torch

    device = loaded.device
    step = train_step_fn(loaded, loaded.autocast, **switches)
    x = torch.randn(args.batch, *loaded.data_config["input_size"], device=device)
    y = torch.randint(0, 4, (args.batch,), device=device)
    for _ in range(2):
        step(x, y)
    sync(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        step(x, y)
    sync(device)
    return args.batch * args.steps / (time.perf_counter() - start)


def reference(args, loaded, data: Path) -> float:
    """timm train.py-style: a folder dataset of PIL images through create_transform(is_training=True)."""
    import timm
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    cfg = loaded.data_config
    tf = timm.data.create_transform(cfg["input_size"], is_training=True, interpolation=cfg["interpolation"],
                                    mean=cfg["mean"], std=cfg["std"])
    loader = DataLoader(ImageFolder(str(data), transform=tf), batch_size=args.batch, shuffle=True, drop_last=True,
                        num_workers=os.cpu_count(), persistent_workers=True,
                        pin_memory=loaded.device.type == "cuda")
    step = train_step_fn(loaded, loaded.autocast)
    rates = []
    for _ in range(2):  # the first epoch warms up the workers
        seen, start = 0, time.perf_counter()
        for x, y in loader:
            step(x.to(loaded.device, non_blocking=True), y.to(loaded.device, non_blocking=True))
            seen += len(y)
        sync(loaded.device)
        rates.append(seen / (time.perf_counter() - start))
    return rates[-1]


def data_only(args, loaded, data: Path) -> tuple[float, float]:
    """Images/s of each data path alone (no model): what it could feed a GPU that is never the bottleneck."""
    import timm
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    from vitstudio.core.data.device_augment import DeviceTrainBatches
    from vitstudio.core.data.imagecache import build_cache, short_side_for

    cfg = loaded.data_config
    tf = timm.data.create_transform(cfg["input_size"], is_training=True, interpolation=cfg["interpolation"],
                                    mean=cfg["mean"], std=cfg["std"])
    dataset = ImageFolder(str(data), transform=tf)
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=os.cpu_count(),
                        persistent_workers=True)
    for _ in loader:  # warm-up epoch
        pass
    start = time.perf_counter()
    n = sum(len(y) for _, y in loader)
    pil_rate = n / (time.perf_counter() - start)
    paths = [Path(p) for p, _ in dataset.samples]
    gen = build_cache(paths, short_side_for(cfg["input_size"][-1]))
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        cache = stop.value
    batches = DeviceTrainBatches(cache, [y for _, y in dataset.samples], cfg["input_size"][1:],
                                 interpolation=cfg["interpolation"], mean=cfg["mean"], std=cfg["std"],
                                 batch_size=args.batch, device=loaded.device)
    start = time.perf_counter()
    n = sum(len(y) for _, y in batches.epoch(1))
    sync(loaded.device)
    return pil_rate, n / (time.perf_counter() - start)


def engine(args, data: Path, out: Path) -> tuple[float, float]:
    from vitstudio.core.train.engine import EpochMetrics, fine_tune
    from vitstudio.core.train.recipes import make_config

    cfg = make_config(str(data), args.model, str(out), preset="full", epochs=args.epochs, batch_size=args.batch,
                      device=args.device, precision=args.precision, val_ratio=0.1, drop_path=0.0,
                      label_smoothing=0.0, warmup_epochs=0, cache_memory_gb=8.0)
    gen = fine_tune(cfg)
    t_prepare, epochs = None, []
    train_images = int(round(args.images * 0.9))
    try:
        while True:
            rec = next(gen)
            if t_prepare is None and getattr(rec, "message", "").startswith(("Decoding", "Decoded")):
                t_prepare = time.perf_counter()  # the model is loaded; the cache build starts
            if isinstance(rec, EpochMetrics):
                epochs.append((time.perf_counter(), rec.seconds))
    except StopIteration:
        pass
    first_epoch = epochs[0][0] - t_prepare  # cache build + first training pass (+ a small validation)
    later = statistics.median(s for _, s in epochs[1:])
    return train_images / first_epoch, train_images / later


def switches(args) -> None:
    """Each optional speed switch on the ceiling step against the plain step, same run: what decides whether it
    becomes a default (kept only where it wins)."""
    from vitstudio.core.models.loading import load_model

    for name, kw in (("channels_last", {"channels_last": True}), ("fused AdamW", {"fused": True}),
                     ("torch.compile", {"compile": True})):
        plain = ceiling(args, load_model(args.model, device=args.device, precision=args.precision))
        try:
            rate = ceiling(args, load_model(args.model, device=args.device, precision=args.precision), **kw)
            print(f"  switch {name:<14} {rate:9.1f} img/s vs plain {plain:9.1f} img/s   {rate / plain:5.2f}x")
        except Exception as exc:  # noqa: BLE001 - a switch this build cannot do is reported, not fatal
            print(f"  switch {name:<14} not available here: {type(exc).__name__}: {str(exc)[:120]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--switches", action="store_true", help="also measure channels_last, fused AdamW, compile")
    ap.add_argument("--only-switches", action="store_true", help="measure only the switches (no JPEGs, no engine)")
    ap.add_argument("--quick", action="store_true", help="the quick preset against linear-probe on the digits with "
                                                         "the demo model (--model auto), cold and warm cache")
    ap.add_argument("--probe-epochs", type=int, default=10, help="linear-probe's epochs with --quick (default 10)")
    ap.add_argument("--threads", type=int, default=0, help="with --quick: torch threads for both presets (default: "
                                                           "torch's)")
    ap.add_argument("--repeats", type=int, default=3, help="with --quick: quick runs per cache state (median)")
    ap.add_argument("--photos", type=int, default=0, help="with --quick: also this many JPEG photos with a ViT-S/16 "
                                                          "(random weights: times only)")
    args = ap.parse_args()
    if args.quick:
        from finetune_quick import main as quick_main

        if args.model == DEFAULT_MODEL:
            args.model = "auto"  # the bundled demo model
        return quick_main(args)

    import torch

    from vitstudio.core.models.loading import load_model

    if args.only_switches:
        print(f"model {args.model}  device {args.device}  precision {args.precision}  batch {args.batch}  "
              f"torch {torch.__version__}")
        switches(args)
        return 0
    tmp = Path(tempfile.mkdtemp())
    data = make_jpegs(tmp / "jpegs", args.images)
    loaded = load_model(args.model, device=args.device, precision=args.precision)
    print(f"model {args.model}  device {loaded.device}  precision {args.precision}  batch {args.batch}  "
          f"{args.images} JPEGs 500x375  torch {torch.__version__}  cores {os.cpu_count()}")
    ceil = ceiling(args, loaded)
    ref = reference(args, load_model(args.model, device=args.device, precision=args.precision), data)
    first, later = engine(args, data, tmp / "run")
    pil_only, cached_only = data_only(args, loaded, data)
    print(f"  ceiling (synthetic tensors on device)   {ceil:9.1f} img/s")
    print(f"  reference (timm-style PIL DataLoader)   {ref:9.1f} img/s   {ref / ceil:5.2f}x ceiling")
    print(f"  engine epoch 1 (incl. decode to cache)  {first:9.1f} img/s   {first / ceil:5.2f}x ceiling")
    print(f"  engine epoch >= 2 (cache + device aug)  {later:9.1f} img/s   {later / ceil:5.2f}x ceiling   "
          f"{later / ref:5.2f}x reference")
    print(f"  data path alone: PIL DataLoader {pil_only:8.1f} img/s, cache + device aug {cached_only:8.1f} img/s "
          f"({cached_only / pil_only:4.1f}x)")
    print("  goals on a GPU: epoch >= 2 at >= 0.90x ceiling and >= 1.70x reference")
    if args.switches:
        switches(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
