"""Benchmark: Teach (issue 51) — refit latency, and Teachable Machine's recipe beside the default head.

    python tests/benchmarks/teach.py [--sizes 50,200,1000] [--vits-sizes 50,200,1000] [--repeats 3]

1. Refit latency at each project size, for the bundled demo (64-d features) and a ViT-S/16-sized random model
   (vit_small_patch16_224: 384-d features at 224 px): `fit_features` (split + fit + every sample's probabilities) on
   features already in the cache (the refit after a change), and "after release": 10 new frames embedded through the
   cache plus the refit (what a user waits for after holding record), median of --repeats. Beside it, the reference:
   scikit-learn's LogisticRegression (lbfgs, the same L2) on the same training features, and the ratio.
2. The same samples and split through the quick head and through Teachable Machine's recipe (core/teach/heads.py,
   transcribed from teachable-mobilenet.ts): validation accuracy and fit time side by side, and the ratio.
3. Preview frames/s: the Teach preview's work per frame (the head on the frame's pooled features, the map if one,
   the annotated picture: core/teach/preview.py + annotate) beside `vitstudio play`'s (core/play/session.py, its
   prediction and the same map, no picture) on every frame of the same video, demo model, unpaced, without a map and
   with rollout; the ratio (goal ≥ 0.8).
The digits are scikit-learn's (rendered by render_digits, up to 180 per class); caches go to a temporary folder.
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
from tests.core.generators import drain  # noqa: E402


def _project(root: Path, per_class: int, extra: int):
    """A class-folder project of `per_class` digits per class, and `extra` more frames kept aside (class 0)."""
    from vitstudio.core.models.demo import render_digits

    data = render_digits(root / f"digits-{per_class}", per_class=per_class + extra)
    aside = root / f"aside-{per_class}"
    aside.mkdir()
    for path in sorted((data / "0").iterdir())[per_class:]:
        path.rename(aside / path.name)
    for name in [c.name for c in data.iterdir() if c.name != "0"]:
        for path in sorted((data / name).iterdir())[per_class:]:
            path.unlink()
    return data, aside


def _sklearn_seconds(features, result) -> float:
    from sklearn.linear_model import LogisticRegression

    x, y = features.features[result.split.train], features.labels[result.split.train]
    started = time.perf_counter()  # C = 1/(l2·n): the same mean-loss + l2/2·||W||² optimum as head_fit.py
    LogisticRegression(C=1.0 / (1e-4 * len(y)), max_iter=100).fit((x - x.mean(0)) / (x.std(0) + 1e-6), y)
    return time.perf_counter() - started


def _latency(loaded, root: Path, total: int, repeats: int) -> dict:
    import shutil

    from vitstudio.core.teach.project import open_project
    from vitstudio.core.teach.session import fit_features, project_features

    data, aside = _project(root, max(2, total // 10), 10)
    features = drain(project_features(loaded, open_project(data)))
    fit_features(features)  # warm: torch.optim's first step imports what it needs once per process
    refits, releases = [], []
    for i in range(repeats):
        started = time.perf_counter()
        result = fit_features(features)
        refits.append(time.perf_counter() - started)
        new = data / "0" / f"new-{i}"
        new.mkdir()
        for path in sorted(aside.iterdir()):  # 10 frames recorded: new files, new content for the cache
            shutil.copy(path, new / f"{i}-{path.name}")
        started = time.perf_counter()
        after = drain(project_features(loaded, open_project(data)))
        fit_features(after)
        releases.append(time.perf_counter() - started)
        shutil.rmtree(new)
    return {"samples": len(features.labels), "refit": statistics.median(refits),
            "release": statistics.median(releases), "sklearn": _sklearn_seconds(features, result),
            "features": features}


def _recipes(features) -> dict:
    from vitstudio.core.teach.session import fit_features

    quick, machine = fit_features(features, "quick"), fit_features(features, "teachable-machine")
    return {"quick": (quick.val_accuracy, quick.fit_seconds), "tm": (machine.val_accuracy, machine.fit_seconds),
            "val": len(quick.split.val)}


def _preview_rate(loaded, head, video: Path, method: str | None) -> tuple[float, float, float]:
    """Frames/s on every frame of `video`, one after the other, with the same map (None: none): the Teach preview's
    work (the tab's job: the head's bars, the map, the annotated picture), the Play tab's (its job: analyse_frame and
    the annotated picture) and `vitstudio play`'s (prediction and map, no --out: no picture)."""
    from vitstudio.core.play.frames import analyse_frame, annotate
    from vitstudio.core.play.session import play
    from vitstudio.core.play.video import FrameSource
    from vitstudio.core.teach.preview import preview_frame

    live = (tuple(str(i) for i in range(10)), head)

    def frames(work, limit=None) -> int:
        with FrameSource(str(video)) as source:
            for n, (index, t, frame) in enumerate(source):
                if limit is not None and n >= limit:
                    return n
                annotate(work(frame, index, t), 12.0, frame=frame)
        return n + 1

    def teach(frame, index, t):
        return preview_frame(loaded, live, frame, index, t, method)

    def play_tab(frame, index, t):
        return analyse_frame(loaded, frame, index, t, method)

    rates = []
    for run in (lambda limit=None: frames(teach, limit), lambda limit=None: frames(play_tab, limit),
                lambda limit=None: sum(1 for _ in play(loaded, str(video), method, live=False, max_frames=limit))):
        run(5)  # warmed up first: the first forwards of a process are slower
        started = time.perf_counter()
        rates.append(run() / (time.perf_counter() - started))
    return tuple(rates)


def _model(name: str):
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    spec = str(bundled_demo()) if name == "demo" else "vit_small_patch16_224"
    return load_model(spec, device="cpu", precision="fp32", pretrained=False) if name != "demo" else \
        load_model(spec, device="cpu", precision="fp32")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--vits-sizes", default="50,200,1000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--preview-frames", type=int, default=120, help="frames of the preview's video (0: skip)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: as the app's refit worker on a "
                        "shared machine; more threads thrash when the cores are busy)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VITSTUDIO_CACHE_DIR"] = str(Path(tmp) / "cache")
        rows = []
        for name, sizes in (("demo", args.sizes), ("vit-s/16 (random)", args.vits_sizes)):
            loaded = _model("demo" if name == "demo" else "vits")
            for total in (int(s) for s in sizes.split(",") if s):
                folder = Path(tmp) / f"{name[:4]}-{total}"
                folder.mkdir()
                row = _latency(loaded, folder, total, args.repeats)
                rows.append((name, row, _recipes(row["features"])))
                _print_row(rows[-1])
        _print_tables(rows)
        if args.preview_frames:
            from tests.core.play_video import moving_digits_video
            from vitstudio.core.teach.session import fit_features

            demo = next(row for name, row, _ in rows if name == "demo")
            video = moving_digits_video(Path(tmp) / "preview.avi", frames=args.preview_frames, fps=12.0)
            for method in (None, "rollout"):
                teach, tab, played = _preview_rate(_model("demo"), fit_features(demo["features"]).head, video, method)
                print(f"\nPreview on {args.preview_frames} frames (demo, unpaced, map {method or 'none'}): Teach "
                      f"{teach:.1f} frames/s; the Play tab's work {tab:.1f} frames/s, ratio {teach / tab:.2f} (goal "
                      f"≥ 0.8); vitstudio play (no picture) {played:.1f} frames/s, ratio {teach / played:.2f}")

def _print_row(row) -> None:
    name, lat, rec = row
    print(f"... {name} {lat['samples']} samples: refit {lat['refit']:.3f} s", file=sys.stderr, flush=True)


def _print_tables(rows) -> None:
    print("\nRefit latency (median; features cached; 'after release' = 10 new frames embedded + refit)")
    print("| model | samples | refit (ours) | sklearn LogisticRegression fit | ratio ours/sklearn | after release |")
    print("|---|---|---|---|---|---|")
    for name, lat, _ in rows:
        print(f"| {name} | {lat['samples']} | {lat['refit']:.3f} s | {lat['sklearn']:.3f} s | "
              f"{lat['refit'] / max(lat['sklearn'], 1e-9):.2f} | {lat['release']:.3f} s |")
    print("\nSame samples, same 15 % per-class split: the default head (quick) vs Teachable Machine's recipe")
    print("| model | samples | held out | quick val acc | TM val acc | quick fit | TM fit | TM/quick time |")
    print("|---|---|---|---|---|---|---|---|")
    for name, lat, rec in rows:
        (qa, qt), (ta, tt) = rec["quick"], rec["tm"]
        print(f"| {name} | {lat['samples']} | {rec['val']} | {qa:.1%} | {ta:.1%} | {qt:.3f} s | {tt:.3f} s | "
              f"{tt / max(qt, 1e-9):.1f}× |")


if __name__ == "__main__":
    main()
