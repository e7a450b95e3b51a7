"""Benchmark: capturing attention + analyses next to a bare fused forward, same model, same tensor, one run.

    python tests/benchmarks/explain.py [--model M [M ...]] [--device auto] [--memory-model M]

Timing (batch 1), for each model (default: ViT-B/16, a DINOv3 ViT-S/16 with RoPE and 4 registers, EVA-02-B/14):
bare fused forward, rollout (captures all layers × heads), head maps of one layer,
gradient rollout; each with its ratio to the bare forward (goal: rollout <= 1.3x on a GPU).
Memory: peak extra host memory (VmHWM growth over the bare forward's peak) of each analysis on a large-token
model, measured in a fresh subprocess per analysis (default ViT-L/14 DINOv2 at 518 px: 1370 tokens; goal <= 1.5 GB).
Faithfulness (issue 24): per image, for every method offered in Compare, the time of its map plus its deletion
and insertion curves (2·(S+1) masked inputs, batched), and of the whole per-image measurement (map, its curves, its
reversed ranking's, the 5 random rankings'), each as a ratio to one bare forward.
Random weights: neither speed nor memory depends on them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_child(model_name: str, analysis: str) -> None:
    """Runs in a subprocess: prints 'bare_peak_mb analysis_peak_mb'."""
    import torch

    from vitstudio.core.analysis import attention
    from vitstudio.core.models.loading import load_model

    torch.set_grad_enabled(False)
    loaded = load_model(model_name, device="cpu", pretrained=False)
    x = torch.randn(1, *loaded.data_config["input_size"])
    with torch.inference_mode():
        loaded.model(x)
    bare = _peak_rss_mb()
    if analysis == "rollout":
        attention.rollout(loaded, x)
    elif analysis == "heads":
        attention.head_maps(loaded, x, -1)
    elif analysis == "stats":
        attention.attention_stats(loaded, x)
    elif analysis == "all-maps":
        attention.attention_maps(loaded, x)
    print(f"{bare:.1f} {_peak_rss_mb():.1f}")


def timing(args, model_name: str) -> None:
    import torch

    from vitstudio.core.analysis import attention
    from vitstudio.core.models.loading import load_model

    loaded = load_model(model_name, device=args.device, pretrained=False)
    device = loaded.device
    x = torch.randn(1, *loaded.data_config["input_size"], device=device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def bare():
        with torch.inference_mode():
            loaded.model(x)

    runs = {"bare fused forward": bare,
            "rollout (all layers x heads)": lambda: attention.rollout(loaded, x),
            "head maps (one layer)": lambda: attention.head_maps(loaded, x, -1),
            "gradient rollout": lambda: attention.gradient_rollout(loaded, x)}
    for fn in runs.values():  # warm-up
        fn()
    sync()
    times = {name: [] for name in runs}
    for _ in range(args.repeats):  # interleaved so that machine noise hits every variant alike
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["bare fused forward"])
    tokens = loaded.num_prefix_tokens + loaded.grid_size[0] * loaded.grid_size[1]
    print(f"model {model_name}  device {device}  tokens {tokens}  torch {torch.__version__}  "
          f"threads {torch.get_num_threads()}")
    peaks = {}
    if device.type == "cuda":  # peak GPU memory of each variant, one call each
        for name, fn in runs.items():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            fn()
            sync()
            peaks[name] = torch.cuda.max_memory_allocated(device) / 2**20
    for name, values in times.items():
        med = statistics.median(values)
        gpu = f"   peak GPU {peaks[name]:8.0f} MB" if name in peaks else ""
        print(f"  {name:<32} {med * 1e3:9.1f} ms   ratio {med / base:5.2f}{gpu}")


def faithfulness_timing(args, model_name: str) -> None:
    import torch

    from vitstudio.core.analysis import faithfulness as fa
    from vitstudio.core.analysis import registry
    from vitstudio.core.analysis.applicability import why_not
    from vitstudio.core.models.loading import load_model

    loaded = load_model(model_name, device=args.device, pretrained=False)
    x = torch.randn(1, *loaded.data_config["input_size"])
    protocol = fa.Protocol(steps=args.steps)
    target = fa.top1(loaded, x)

    def bare():
        with torch.inference_mode():
            loaded.model(x.to(loaded.device))

    def map_and_curves(method):
        fa.curves(loaded, x, fa.ranking(fa.method_map(loaded, x, method, target)), target, protocol)

    def timed(fn) -> float:
        fn()  # warm-up
        values = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            if loaded.device.type == "cuda":
                torch.cuda.synchronize()
            values.append(time.perf_counter() - start)
        return statistics.median(values)

    base = timed(bare)
    print(f"faithfulness, {model_name}  device {loaded.device}  steps {args.steps}  (one bare forward "
          f"{base * 1e3:.1f} ms)")
    for method in registry.names(compare=True):
        if why_not(loaded.model, method) is not None:
            continue
        one = timed(lambda m=method: map_and_curves(m))
        whole = timed(lambda m=method: fa.image_faithfulness(loaded, x, [m], protocol))
        print(f"  {method:<22} map + curves {one * 1e3:9.1f} ms  ratio {one / base:7.1f}   with baselines "
              f"{whole * 1e3:9.1f} ms  ratio {whole / base:7.1f}")


def memory(args) -> None:
    print(f"peak extra host memory over the bare forward, {args.memory_model} (fresh process each):")
    for analysis in ("rollout", "heads", "stats", "all-maps"):
        out = subprocess.run([sys.executable, __file__, "--child", args.memory_model, analysis],
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            print(f"  {analysis:<10} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        bare, peak = map(float, out.stdout.split()[-2:])
        print(f"  {analysis:<10} bare peak {bare:8.0f} MB   with analysis {peak:8.0f} MB   extra {peak - bare:7.0f} MB")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", nargs="+", default=["vit_base_patch16_224", "vit_small_patch16_dinov3",
                                                     "eva02_base_patch14_224"])
    ap.add_argument("--memory-model", default="vit_large_patch14_dinov2")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "ANALYSIS"), help=argparse.SUPPRESS)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--faithfulness", nargs="*", metavar="MODEL", help="time the faithfulness measurement of every "
                    "Compare method on these models (default: the first --model)")
    ap.add_argument("--steps", type=int, default=16, help="faithfulness steps S (default 16)")
    args = ap.parse_args()
    if args.child:
        memory_child(*args.child)
        return 0
    if args.faithfulness is not None:
        for model_name in args.faithfulness or args.model[:1]:
            faithfulness_timing(args, model_name)
        return 0
    for model_name in args.model:
        timing(args, model_name)
    if not args.skip_memory:
        memory(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
