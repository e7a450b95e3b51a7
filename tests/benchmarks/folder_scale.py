"""Benchmark: folder commands at scale beside the bare model, each as a whole process (imports and model load
included, as a user runs them).

    python tests/benchmarks/folder_scale.py                        (1k and 10k images)
    python tests/benchmarks/folder_scale.py --sizes 1000 10000 50000 100000
    python tests/benchmarks/folder_scale.py --sizes 1000 --commands predict,audit

Images: generated 32×32 PNGs in 10 class folders (random coarse blocks under noise: every file distinct). Model:
the bundled demo (digits-vit, 32 px), so the app's own work shows rather than the model's.

Reference: a bare script (below, ~20 lines): PIL decode + timm's eval transform + forward in batches of 256, in a
fresh process like the commands. Each command runs cold (an empty cache folder) then warm (the same cache, nothing
changed). The reference runs again right before each command (on a shared machine the load moves within minutes)
and each ratio is to that run. Printed per size: wall seconds, the ratio to the reference (warm: and to cold), CPU
seconds and peak RSS of the process; then the growth exponent of each wall time between consecutive sizes (1.0 =
linear). The load average at the start of each size is printed beside it.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

BARE = r"""
import sys, torch, timm
from pathlib import Path
from PIL import Image
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.models.loading import load_model
loaded = load_model(str(bundled_demo()), device="cpu")
transform = timm.data.create_transform(**loaded.data_config)
files = sorted(p for p in Path(sys.argv[1]).rglob("*.png"))
top = []
with torch.inference_mode():
    for start in range(0, len(files), 256):
        batch = torch.stack([transform(Image.open(p).convert("RGB")) for p in files[start:start + 256]])
        top.append(loaded.model(batch).argmax(1))
print(len(torch.cat(top)))
"""

COMMANDS = {
    "predict": lambda folder, out: ["predict", str(folder), "--csv", str(out / "predictions.csv"), "--quiet"],
    "embed": lambda folder, out: ["embed", str(folder), "--quiet"],
    "audit": lambda folder, out: ["audit", str(folder), "--json", "--quiet"],
    "layers": lambda folder, out: ["layers", str(folder), "--json"],
    "scores": lambda folder, out: ["scores", str(folder), "--csv", str(out / "scores.csv")],
}


def make_images(root: Path, n: int, seed: int = 0) -> Path:
    """n distinct 32×32 PNGs in class0 … class9 (made once per size and kept under `root`)."""
    from PIL import Image

    folder = root / f"images-{n}"
    if (folder / ".complete").exists():
        return folder
    rng = np.random.default_rng(seed)
    for i in range(n):
        sub = folder / f"class{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        coarse = rng.integers(0, 256, (4, 4, 3)).astype(np.uint8)
        big = np.asarray(Image.fromarray(coarse).resize((32, 32), Image.BILINEAR), np.int16)
        noise = rng.integers(-20, 20, (32, 32, 3))
        Image.fromarray(np.clip(big + noise, 0, 255).astype(np.uint8)).save(sub / f"{i:06d}.png")
    (folder / ".complete").touch()
    return folder


def timed(argv: list[str], env: dict) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=env["PYTHONPATH"])
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[2:4])} failed ({proc.returncode}):\n{err[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure(n: int, work: Path, commands: list[str], checkout: Path) -> dict:
    """Per command: the bare reference, then the command cold, then warm, back to back (the machine is shared: a
    reference run right beside each command keeps its ratio meaningful when the load moves)."""
    folder = make_images(work, n)
    env = {**os.environ, "VITSTUDIO_DATA_DIR": str(work / "data"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(checkout)}
    figures = {}
    for name in commands:
        cache = work / f"cache-{n}-{name}"
        shutil.rmtree(cache, ignore_errors=True)
        argv = [sys.executable, "-m", "vitstudio", *COMMANDS[name](folder, work)]
        run_env = {**env, "VITSTUDIO_CACHE_DIR": str(cache)}
        load = os.getloadavg()[0]
        figures[f"{name} bare"] = timed([sys.executable, "-c", BARE, str(folder)], env)
        figures[f"{name} cold"] = timed(argv, run_env)
        figures[f"{name} warm"] = timed(argv, run_env)
        shutil.rmtree(cache, ignore_errors=True)
        print(f"{n} {name} (load {load:.1f} at its start): " + "; ".join(  # as it comes: a long run cut short
            f"{kind} {_cell(figures, f'{name} {kind}')}" for kind in ("bare", "cold", "warm")), flush=True)
    return figures


def _cell(figures: dict, name: str) -> str:
    seconds, cpu, rss = figures[name]
    command = name.rsplit(" ", 1)[0]
    bare, cold = figures[f"{command} bare"][0], figures[f"{command} cold"][0]
    extra = f" ({seconds / cold:.2f}× cold)" if name.endswith("warm") else ""
    return f"{seconds:6.1f} s {seconds / bare:5.2f}×{extra:<13} cpu {cpu:6.1f} s {rss:5.0f} MB"


def report(sizes: list[int], results: dict[int, dict], loads: dict[int, float]) -> None:
    names = list(results[sizes[0]])
    print(f"\n{'step':<14}" + "".join(f"{f'{n} images (load {loads[n]:.1f})':>52}" for n in sizes))
    for name in names:
        print(f"{name:<14}" + "".join(f"{_cell(results[n], name):>52}" for n in sizes))
    if len(sizes) > 1:
        print("\ngrowth exponent of the wall time (log time ratio / log size ratio; 1.0 = linear):")
        for name in names:
            slopes = [math.log(results[b][name][0] / results[a][name][0]) / math.log(b / a)
                      for a, b in zip(sizes, sizes[1:])]
            print(f"{name:<14}" + "".join(f"{s:>12.2f}" for s in slopes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--commands", default="predict,embed,audit,layers",
                        help=f"comma-separated, of {', '.join(COMMANDS)}")
    parser.add_argument("--work", help="where the images and caches go (default: a temporary folder, removed)")
    parser.add_argument("--checkout", default=str(ROOT), help="the source tree whose commands run (e.g. an older "
                        "commit's `git archive` unpacked, for a before/after table); default: this one")
    args = parser.parse_args()
    commands = [c for c in args.commands.split(",") if c]
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        parser.error(f"unknown command(s): {', '.join(sorted(unknown))}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="vitstudio-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    results, loads = {}, {}
    try:
        for n in args.sizes:
            loads[n] = os.getloadavg()[0]
            results[n] = measure(n, work, commands, Path(args.checkout).resolve())
            print(f"{n}: " + ", ".join(f"{k} {v[0]:.1f} s" for k, v in results[n].items()), flush=True)
        report(args.sizes, results, loads)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
