"""Benchmark: ViT Studio's classify path next to a bare timm forward, same model, same tensors, same run.

    python tests/benchmarks/predict.py [--model vit_small_patch16_224] [--device auto] [--batch 32]

Prints, for single-image latency (on CUDA also with CUDA graphs off) and batch throughput:
  * engine  = vitstudio.core.inference.classify_tensor (forward + softmax + top-k + labels)
  * bare    = model(x) under torch.inference_mode()
and the ratio engine/bare (goal <= 1.05 on batches). Also the whole classify() from PIL images next to
timm's create_transform + forward on the same images. Random weights: speed does not depend on them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
from PIL import Image  # noqa: E402

from vitstudio.core.inference import classify, classify_tensor  # noqa: E402
from vitstudio.core.models.loading import load_model  # noqa: E402


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timeit(fn, device, repeats: int, warmup: int = 3) -> float:
    """Median seconds per call; bare and engine calls are interleaved by the caller's loop order."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def paired(label, engine_fn, bare_fn, device, repeats, per_call_items):
    # alternate rounds so machine noise hits both sides alike
    engine, bare = [], []
    for _ in range(3):
        bare.append(timeit(bare_fn, device, repeats))
        engine.append(timeit(engine_fn, device, repeats))
    e, b = min(engine), min(bare)
    print(f"{label:<34} engine {e * 1e3:9.2f} ms  bare {b * 1e3:9.2f} ms  ratio {e / b:5.3f}  "
          f"({per_call_items / e:8.1f} img/s vs {per_call_items / b:8.1f} img/s)")
    return e / b


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vit_small_patch16_224")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-pil", action="store_true", help="skip the from-PIL comparison (CPU-bound, same on any GPU)")
    args = ap.parse_args()

    loaded = load_model(args.model, device=args.device, precision=args.precision, pretrained=False)
    model, device = loaded.model, loaded.device
    print(f"model {args.model}  device {device}  precision {args.precision}  torch {torch.__version__}  "
          f"threads {torch.get_num_threads()}")

    from skimage import data

    photos = [Image.fromarray(getattr(data, n)()) for n in ("astronaut", "chelsea", "coffee", "rocket")]
    images = [photos[i % len(photos)] for i in range(args.batch)]
    batch = torch.stack([loaded.to_tensor(loaded.crop(img)) for img in images])
    one = batch[:1]
    names = [f"img{i}" for i in range(args.batch)]

    def bare(x):
        def run():
            with torch.inference_mode(), loaded.autocast():
                model(x.to(device)).float().cpu()
        return run

    r1 = paired("latency, batch 1 (tensor)", lambda: classify_tensor(loaded, one, names[:1]), bare(one),
                device, args.repeats * 4, 1)
    if device.type == "cuda":  # the same calls without CUDA graphs: what the graph saves at batch 1
        os.environ["VITSTUDIO_CUDA_GRAPHS"] = "0"
        paired("latency, batch 1, CUDA graphs off", lambda: classify_tensor(loaded, one, names[:1]), bare(one),
               device, args.repeats * 4, 1)
        del os.environ["VITSTUDIO_CUDA_GRAPHS"]
    rb = paired(f"throughput, batch {args.batch} (tensor)", lambda: classify_tensor(loaded, batch, names),
                bare(batch), device, args.repeats, args.batch)

    if args.no_pil:
        print(f"summary: ratio batch1 {r1:.3f}, batch{args.batch} {rb:.3f} (goal <= 1.05 on batches)")
        return 0
    import timm

    transform = timm.data.create_transform(**loaded.data_config)

    def timm_pil():
        x = torch.stack([transform(img) for img in images])
        with torch.inference_mode(), loaded.autocast():
            model(x.to(device)).float().cpu()

    rp = paired(f"from PIL, batch {args.batch}", lambda: classify(loaded, images, names, keep_crops=False),
                timm_pil, device, max(2, args.repeats // 2), args.batch)
    print(f"summary: ratio batch1 {r1:.3f}, batch{args.batch} {rb:.3f}, PIL batch{args.batch} {rp:.3f} "
          f"(goal <= 1.05 on batches)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
