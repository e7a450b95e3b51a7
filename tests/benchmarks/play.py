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

    python tests/benchmarks/play.py --window [--model DEMO_OR_SPEC] [--method rollout] [--sizes 240 720]
                                         [--seconds 4] [--fps 500] [--repeats 3]

The window stage: one generated video file per frame size (moving digits) played by the Play tab (offscreen, the
real panel under Qt's event loop: reader thread, worker, newest frame only, each picture put on the screen) beside
`vitstudio play --out`'s loop on the same file, model and method, alternating, one torch thread. Both sides do the
same work per frame: analyse it and draw the annotated picture (the CLI leaves out only the encoder, the tab adds
putting the picture on screen). The file's rate is above both sides' speed, so neither is paced: each runs as fast
as it can (the tab skipping the frames that arrive while it is busy). Prints per run and the median (with the
spread) of CLI frames/s, tab frames/s and the ratio tab / CLI, with each side's CPU time per frame and the load
(on a shared machine the frames/s swing with the load, the CPU per frame much less). Goal: ratio >= 0.80 (issue 49,
item 7).

    python tests/benchmarks/play.py --reader [--sizes 240 720] [--seconds 4] [--fps 500] [--repeats 3]

The reader stage: the tab's frame reader (LatestFrame: every frame grabbed, a picture made only of those handed
over) under a consumer taking a frame every 10 ms, beside reading and converting every frame of the same file in the
same run; CPU ms per frame of the file and the share of a core at the file's rate.
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


def cli_run(loaded, video: Path, method: str | None, seconds: float) -> tuple[list[float], list[float]]:
    """`vitstudio play VIDEO --out …`'s loop (`core.play.session.play`): every frame in order, analysed and drawn
    as the annotated picture (the encoder left out: the tab does not encode either), for `seconds` at most.
    Returns the time each picture was ready and each frame's latency."""
    from vitstudio.core.play.frames import Rate
    from vitstudio.core.play.video import FrameSource

    stamps, latencies, rate = [], [], Rate()
    started = time.perf_counter()
    with FrameSource(str(video)) as src:
        for index, t, frame in src:
            result = analyse_frame(loaded, frame, index, t, method)
            annotate(result, rate.tick(), frame=frame)
            stamps.append(time.perf_counter())
            latencies.append(result.latency_ms)
            if stamps[-1] - started > seconds:
                break
    return stamps, latencies


def tab_run(app, panel, video: Path, seconds: float) -> tuple[list[float], list[float], list[float]]:
    """The Play tab on `video` under Qt's own event loop (no polling) until it finishes or `seconds` pass: the time
    each annotated frame was put on the screen, its latency and the GUI thread's time for it (ms)."""
    from PySide6.QtCore import QEventLoop, QTimer

    from vitstudio.gui import workers

    stamps, latencies, gui_ms, loop = [], [], [], QEventLoop()
    draw, finished = type(panel)._show, type(panel)._on_finished

    def show(value):
        started = time.perf_counter()
        draw(panel, value)
        stamps.append(time.perf_counter())
        gui_ms.append((stamps[-1] - started) * 1000)
        latencies.append(value[1].latency_ms)

    def on_finished(summary):
        finished(panel, summary)
        loop.quit()

    panel._show, panel._on_finished = show, on_finished  # the drawing of the newest frame; the end (read at start)
    QTimer.singleShot(int(seconds * 1000) + 2000, loop.quit)
    panel.play(str(video))
    loop.exec()
    panel.stop()
    while workers.running_jobs():  # the session winds down before the next run
        app.processEvents()
        time.sleep(0.005)
    return stamps, latencies, gui_ms


def frames_per_s(stamps: list[float]) -> float:
    """Frames after the first over the time from the first to the last: the steady rate, start-up left out."""
    return (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0


def reader_stage(sizes: list[int], seconds: float, fps: float, repeats: int, busy_ms: float = 10.0) -> None:
    """The Play tab's frame reader (LatestFrame, paced at the file's rate) under a consumer that takes a frame every
    `busy_ms` (a model at work, sleeping: no CPU of its own), beside the reference in the same run: reading and
    converting every frame of the file (FrameSource in order, what the reader did before it grabbed the frames it
    skips). CPU time of the process (FFmpeg's threads included), so the figure holds on a loaded machine."""
    import tempfile

    from tests.core.play_video import moving_digits_video
    from vitstudio.core.play.video import FrameSource, LatestFrame

    folder = Path(tempfile.mkdtemp())
    print(f"a {fps:g} frames/s file, {seconds:g} s; the consumer takes a frame every {busy_ms:g} ms; CPU ms per frame "
          f"of the file and the share of a core at the file's rate; medians of {repeats}")
    print(f"{'size':>5} {'every ms':>9} {'reader ms':>9} {'ratio':>6} {'every core':>10} {'reader core':>11} "
          f"{'taken':>6} {'pictures':>8} {'read':>5}")
    for size in sizes:
        video = moving_digits_video(folder / f"digits{size}.mp4", frames=int(seconds * fps), size=size, fps=fps)
        every, lazy, counts = [], [], None
        for _ in range(repeats):
            cpu = time.process_time()
            with FrameSource(str(video)) as src:
                frames = sum(1 for _ in src)
            every.append((time.process_time() - cpu) * 1000 / frames)
            latest = LatestFrame(FrameSource(str(video)))
            cpu, taken = time.process_time(), 0
            while latest.take() is not None:
                taken += 1
                time.sleep(busy_ms / 1000)
            lazy.append((time.process_time() - cpu) * 1000 / latest.read_count)
            latest.close()
            counts = (taken, latest.picture_count, latest.read_count)
        e, r = statistics.median(every), statistics.median(lazy)
        print(f"{size:5d} {e:9.3f} {r:9.3f} {r / e:6.2f} {e * fps / 1000:9.0%} {r * fps / 1000:10.0%} "
              f"{counts[0]:6d} {counts[1]:8d} {counts[2]:5d}", flush=True)


def window_stage(model: str, sizes: list[int], seconds: float, fps: float, method: str | None,
                 repeats: int) -> None:
    import os
    import tempfile

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    torch.set_num_threads(1)
    from PySide6.QtWidgets import QApplication

    from tests.core.play_video import moving_digits_video
    from vitstudio.app.app_state import AppState
    from vitstudio.gui import workers
    from vitstudio.gui.explore.play_panel import PlayPanel

    app = QApplication.instance() or QApplication([])
    loaded = load_model(model, device="cpu", precision="fp32")
    state = AppState()
    state.set_model(loaded)
    panel = PlayPanel(state)
    panel.resize(900, 600)
    panel.show()
    if method:
        panel.view_state.method = method
    folder = Path(tempfile.mkdtemp())
    print(f"{method or 'prediction only'}, {torch.get_num_threads()} torch thread(s), a {fps:g} frames/s file "
          f"(faster than either side: neither is paced), {seconds:g} s a run; frames/s = steady rate of annotated "
          "pictures ready (CLI) / drawn (tab)")
    print("cpu ms = the process's CPU time per frame (analysed, CLI; drawn, tab: the reader, the threads and the "
          "window included), a figure that holds on a loaded machine; load = the 1-minute load average")
    print(f"{'size':>5} {'run':>4} {'cli f/s':>8} {'tab f/s':>8} {'ratio':>6} {'cli ms':>7} {'tab ms':>7} "
          f"{'tab frames':>10} {'tab GUI ms':>10} {'cli cpu ms':>10} {'tab cpu ms':>10} {'load':>5}")
    for size in sizes:
        video = moving_digits_video(folder / f"digits{size}.mp4", frames=int(seconds * fps), size=size, fps=fps)
        cli_run(loaded, video, method, 0.5)  # warm: the map's first forward, the font
        tab_run(app, panel, video, 0.5)
        cli, tab = [], []
        for r in range(repeats):
            cpu = time.process_time()
            c_stamps, c_lat = cli_run(loaded, video, method, seconds)
            cpu, c_cpu = time.process_time(), (time.process_time() - cpu) * 1000 / max(len(c_stamps), 1)
            t_stamps, t_lat, t_gui = tab_run(app, panel, video, seconds)
            t_cpu = (time.process_time() - cpu) * 1000 / max(len(t_stamps), 1)
            cli.append(frames_per_s(c_stamps))
            tab.append(frames_per_s(t_stamps))
            print(f"{size:5d} {r + 1:4d} {cli[-1]:8.1f} {tab[-1]:8.1f} {tab[-1] / cli[-1]:6.2f} "
                  f"{statistics.median(c_lat):7.1f} {statistics.median(t_lat) if t_lat else float('nan'):7.1f} "
                  f"{len(t_stamps):10d} {statistics.median(t_gui) if t_gui else float('nan'):10.2f} "
                  f"{c_cpu:10.2f} {t_cpu:10.2f} {os.getloadavg()[0]:5.1f}", flush=True)
        ratios = [t / c for t, c in zip(tab, cli)]
        print(f"{size:5d} {'med':>4} {statistics.median(cli):8.1f} {statistics.median(tab):8.1f} "
              f"{statistics.median(tab) / statistics.median(cli):6.2f}   cli {min(cli):.0f}–{max(cli):.0f}, "
              f"tab {min(tab):.0f}–{max(tab):.0f}, ratio {min(ratios):.2f}–{max(ratios):.2f} "
              "(goal: ratio >= 0.80)", flush=True)
    workers.shutdown(5000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", action="store_true", help="the Play tab beside the CLI on one video file")
    ap.add_argument("--reader", action="store_true", help="the Play tab's frame reader's CPU beside reading and "
                    "converting every frame")
    ap.add_argument("--model", default=None, help="window stage: the model (default: the bundled demo)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[240, 720], help="window stage: frame sizes (px)")
    ap.add_argument("--seconds", type=float, default=4.0, help="window stage: the length of each run")
    ap.add_argument("--fps", type=float, default=500.0, help="window stage: the file's frame rate (above both "
                    "sides' speed, so the tab's pacing never holds it back)")
    ap.add_argument("--repeats", type=int, default=3, help="window stage: runs per side and size")
    ap.add_argument("--method", default=None, help="window stage: a map over each frame (e.g. rollout)")
    ap.add_argument("--models", nargs="+", default=["vit_tiny_patch16_224", "vit_small_patch16_224",
                                                    "vit_base_patch16_224"])
    ap.add_argument("--methods", nargs="+", default=["none", "rollout"])
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="auto")
    args = ap.parse_args()
    if args.reader:
        reader_stage(args.sizes, args.seconds, args.fps, args.repeats)
        return
    if args.window:
        from vitstudio.core.models.demo import bundled_demo

        window_stage(args.model or str(bundled_demo()), args.sizes, args.seconds, args.fps, args.method,
                     args.repeats)
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
