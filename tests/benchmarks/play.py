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

    python tests/benchmarks/play.py --window [--model DEMO_OR_SPEC] [--seconds 10] [--fps 30]

The window stage (issue 29, item 13): one generated video file (moving digits, its own frame rate) played by the
Play tab (offscreen, the real panel: worker, newest frame only, each frame drawn before the next is taken) beside
`vitstudio play`'s session on the same file and model; frames/s and median latency of each and the ratio window /
CLI, against the file's own rate when the CLI is faster than the file (the tab keeps the file's pace, the CLI runs
every frame as fast as it can). Goal: the window loses at most 20 %.
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


def window_stage(model: str, seconds: float, fps: float, method: str | None) -> None:
    import os
    import tempfile

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from tests.core.play_video import moving_digits_video
    from vitstudio.app.app_state import AppState
    from vitstudio.core.play.session import play
    from vitstudio.gui import workers
    from vitstudio.gui.explore.play_panel import PlayPanel

    app = QApplication.instance() or QApplication([])
    video = moving_digits_video(Path(tempfile.mkdtemp()) / "digits.mp4", frames=int(seconds * fps), size=240, fps=fps)
    loaded = load_model(model, device="cpu", precision="fp32")
    started, latencies = time.perf_counter(), []
    for result, _rate in play(loaded, str(video), method=method, out=None):
        latencies.append(result.latency_ms)
    cli_s = time.perf_counter() - started
    cli_fps = len(latencies) / cli_s
    state = AppState()
    state.set_model(loaded)
    panel = PlayPanel(state)
    panel.resize(900, 600)
    panel.show()
    shown, window_latency = [], []
    original = panel._on_frame

    def counted(value):
        shown.append(time.perf_counter())
        window_latency.append(value[1].latency_ms)
        original(value)

    panel._on_frame = counted
    if method:
        panel.view_state.method = method
    panel.play(str(video))
    deadline = time.perf_counter() + seconds * 3 + 30
    while panel.stop_button.isEnabled() and time.perf_counter() < deadline:
        app.processEvents()
        time.sleep(0.001)
    workers.shutdown(5000)
    window_fps = (len(shown) - 1) / max(shown[-1] - shown[0], 1e-9) if len(shown) > 1 else 0.0
    reference = min(cli_fps, fps)
    print(f"{'stage':<10} {'frames':>7} {'frames/s':>9} {'latency ms':>11}")
    print(f"{'file':<10} {int(seconds * fps):7d} {fps:9.1f} {'':>11}")
    print(f"{'cli':<10} {len(latencies):7d} {cli_fps:9.1f} {statistics.median(latencies):11.1f}")
    print(f"{'window':<10} {len(shown):7d} {window_fps:9.1f} "
          f"{statistics.median(window_latency) if window_latency else float('nan'):11.1f}")
    print(f"window / min(cli, file rate) = {window_fps / reference:.2f} (goal >= 0.80)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", action="store_true", help="the Play tab beside the CLI on one video file")
    ap.add_argument("--model", default=None, help="window stage: the model (default: the bundled demo)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--method", default=None, help="window stage: a map over each frame (e.g. rollout)")
    ap.add_argument("--models", nargs="+", default=["vit_tiny_patch16_224", "vit_small_patch16_224",
                                                    "vit_base_patch16_224"])
    ap.add_argument("--methods", nargs="+", default=["none", "rollout"])
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="auto")
    args = ap.parse_args()
    if args.window:
        from vitstudio.core.models.demo import bundled_demo

        window_stage(args.model or str(bundled_demo()), args.seconds, args.fps, args.method)
        return
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
