"""`finetune.py --quick`: the quick preset against linear-probe, same run, same data, same split (issue 22 item 1).

    python tests/benchmarks/finetune.py --quick [--model models/digits-vit] [--probe-epochs 10] [--device cpu]
                                        [--photos N]   (also N JPEG photos with a ViT-S/16, random weights)

On the 1,797 scikit-learn digits (rendered 32×32, as the bundled demo model saw them) with the demo model:
  quick, cache cold — the whole run: model load, features of every image (computed), head fit, results written;
  quick, cache warm — the same run again (features from the cache), and the head fit alone;
  linear-probe      — the whole run (cached decoded data path, every epoch through the frozen backbone).
Validation accuracy of each (the same split: same seed, same rules). Goals: quick cold ≤ 0.2× linear-probe's
time, head fit ≤ 2 s warm, accuracy within 1 point. The caches (embeddings, decoded images) live in a fresh
temporary folder, so "cold" is cold.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path


def _timed_run(config) -> tuple[float, float, object]:
    """(wall seconds, seconds from the head's first step to its last — 0 for other presets, result)."""
    from vitstudio.core.train.engine import EpochMetrics, fine_tune

    gen, started, first_step, last_step = fine_tune(config), time.perf_counter(), None, None
    try:
        while True:
            rec = next(gen)
            if isinstance(rec, EpochMetrics):
                now = time.perf_counter()
                first_step = first_step or now - rec.seconds  # the first step's start
                last_step = now
    except StopIteration as stop:
        result = stop.value
    fit = (last_step - first_step) if config.data_path == "features" and last_step else 0.0
    return time.perf_counter() - started, fit, result


VIT_S = "custom:img=224,patch=16,width=384,depth=12,heads=6,classes=4"  # ViT-S/16's shape


def _vit_s_weights(folder: Path) -> str:
    """A ViT-S/16 with fixed random weights (no download here): the same model in every run, so the embedding cache
    of the second quick run is warm. Its accuracy means nothing; its times do."""
    import timm
    from safetensors.torch import save_file

    model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=4)
    path = folder / "vit_s_random.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return str(path)


def main(args) -> int:
    os.environ["VITSTUDIO_CACHE_DIR"] = tempfile.mkdtemp(prefix="vitstudio-bench-cache-")  # cold caches
    import torch

    if args.threads:  # one for both presets: on a CPU shared with other jobs, 2 OpenMP threads can be 5x slower
        torch.set_num_threads(args.threads)
    from vitstudio.core.models.demo import bundled_demo, render_digits

    tmp = Path(tempfile.mkdtemp(prefix="vitstudio-bench-"))
    print(f"device {args.device}  torch {torch.__version__}  threads {torch.get_num_threads()}")
    model = args.model if args.model != "auto" else str(bundled_demo())
    data = render_digits(tmp / "digits")
    _compare(args, data, model, None, tmp / "digits-runs", f"{sum(1 for _ in data.rglob('*.png'))} digits, {model}")
    if args.photos:
        from finetune import make_jpegs

        photos = make_jpegs(tmp / "photos", args.photos)
        _compare(args, photos, VIT_S, _vit_s_weights(tmp), tmp / "photo-runs",
                 f"{args.photos} JPEG photos 500×375, ViT-S/16 shape, random weights (times only)")
    return 0


def _compare(args, data: Path, model: str, weights: str | None, runs: Path, what: str) -> None:
    from vitstudio.core.train.recipes import make_config

    print(f"{what}; linear-probe epochs {args.probe_epochs}; quick: median of {args.repeats} runs")

    def config(preset, name, **kw):
        return make_config(str(data), model, str(runs / name), preset=preset, device=args.device, weights=weights,
                           **kw)

    colds, warms = [], []
    for k in range(args.repeats):  # quick runs take seconds: the median of a few, each with its own cold cache
        os.environ["VITSTUDIO_CACHE_DIR"] = tempfile.mkdtemp(prefix="vitstudio-bench-cache-")
        colds.append(_timed_run(config("quick", f"quick-cold-{k}")))
        warms.append(_timed_run(config("quick", f"quick-warm-{k}")))
    print("  quick runs, cold: " + ", ".join(f"{r[0]:.2f}" for r in colds) + " s; warm: "
          + ", ".join(f"{r[0]:.2f}" for r in warms) + " s")
    cold, cold_fit, quick = sorted(colds, key=lambda r: r[0])[len(colds) // 2]
    warm, warm_fit, quick_warm = sorted(warms, key=lambda r: r[0])[len(warms) // 2]
    probe, _, lp = _timed_run(config("linear-probe", "linear-probe", epochs=args.probe_epochs, batch_size=64))
    print(f"  {'':<28}{'wall s':>9}{'val acc':>10}{'vs linear-probe':>17}")
    print(f"  {'quick, cache cold':<28}{cold:9.2f}{quick.best_val_acc * 100:9.2f}%{cold / probe:16.3f}x")
    print(f"  {'quick, cache warm':<28}{warm:9.2f}{quick_warm.best_val_acc * 100:9.2f}%{warm / probe:16.3f}x")
    print(f"  {'  head fit alone (warm)':<28}{warm_fit:9.2f}   ({quick_warm.epochs_done} full-batch steps; "
          f"cold: {cold_fit:.2f})")
    print(f"  {f'linear-probe, {args.probe_epochs} epochs':<28}{probe:9.2f}{lp.best_val_acc * 100:9.2f}%"
          f"{1.0:16.3f}x")
    gap = (quick.best_val_acc - lp.best_val_acc) * 100
    print(f"  goals: cold ≤ 0.2x ({cold / probe:.3f}x {'met' if cold / probe <= 0.2 else 'MISSED'}), head fit ≤ 2 s "
          f"({warm_fit:.2f} s {'met' if warm_fit <= 2 else 'MISSED'}), accuracy within 1 point "
          f"({gap:+.2f} points {'met' if gap >= -1 else 'MISSED'})")
