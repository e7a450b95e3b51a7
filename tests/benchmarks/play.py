"""Benchmark: play mode's frames per second and latency per model size, with and without a map, beside a bare
timm forward of the same frame in the same run.

    python tests/benchmarks/play.py [--models vit_tiny_patch16_224 vit_small_patch16_224 vit_base_patch16_224]
                                    [--methods none rollout] [--frames 40] [--device auto]

Per model and method:
  * play  = one frame through `vitstudio.core.play.frames.analyse_frame` + `annotate` (what the Play tab and
            `vitstudio play` do per frame: preprocessing, prediction, the map, the annotated picture)
  * bare  = model(x) on the already preprocessed frame under torch.inference_mode()
frames/s = 1 / median play time; latency = the median; ratio = play / bare (what the app adds around the model).
Goal on a GPU: ≥ 25 frames/s with rollout for ViT-S/16 and ViT-B/16. Random weights: speed does not depend on them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from vitstudio.core.models.loading import load_model  # noqa: E402
from vitstudio.core.play.frames import analyse_frame, annotate  # noqa: E402


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def median_s(fn, device, frames: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(frames):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["vit_tiny_patch16_224", "vit_small_patch16_224",
                                                    "vit_base_patch16_224"])
    ap.add_argument("--methods", nargs="+", default=["none", "rollout"])
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="auto")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)  # a VGA camera frame
    print(f"{'model':<28} {'map':<10} {'play ms':>8} {'frames/s':>9} {'bare ms':>8} {'ratio':>6}")
    for name in args.models:
        loaded = load_model(name, device=args.device, precision=args.precision, pretrained=False)
        from PIL import Image

        x = loaded.to_tensor(loaded.crop(Image.fromarray(frame)))[None].to(loaded.device)

        def bare(loaded=loaded, x=x):
            with torch.inference_mode(), loaded.autocast():
                loaded.model(x)

        bare_s = median_s(bare, loaded.device, args.frames)
        for method in args.methods:
            chosen = None if method == "none" else method

            def one(loaded=loaded, chosen=chosen):
                annotate(analyse_frame(loaded, frame, method=chosen), fps=None)

            play_s = median_s(one, loaded.device, args.frames)
            print(f"{name:<28} {method:<10} {play_s * 1000:8.1f} {1 / play_s:9.1f} {bare_s * 1000:8.1f} "
                  f"{play_s / bare_s:6.2f}", flush=True)


if __name__ == "__main__":
    main()
