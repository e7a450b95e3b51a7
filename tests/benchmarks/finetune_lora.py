"""LoRA and DoRA beside last-blocks and full fine-tuning: same data, same split, same epochs (issue 34 item 5).

    python tests/benchmarks/finetune_lora.py [--epochs 5] [--model models/digits-vit] [--photos N] [--threads 2]

On the 1,797 scikit-learn digits (rendered as the bundled demo model saw them) with the demo model, each preset's
best validation accuracy, median seconds per epoch (the training pass alone) and trainable parameters; with
`--photos N`, the same on N JPEG photos with a ViT-S/16 of fixed random weights (no download here: its accuracies
mean nothing, its times and counts do). Augmentation as the presets set it, flips off (digits are oriented).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PRESETS = ("last-blocks", "lora", "dora", "full")


def _run(data: Path, model: str, weights: str | None, preset: str, out: Path, epochs: int) -> dict:
    from vitstudio.core.train.engine import EpochMetrics, Progress, fine_tune
    from vitstudio.core.train.recipes import make_config

    config = make_config(str(data), model, str(out), preset=preset, epochs=epochs, batch_size=64, hflip=0.0,
                         weights=weights, device="cpu", precision="fp32", seed=0, warmup_epochs=1.0)
    gen, seconds, trainable = fine_tune(config), [], ""
    try:
        while True:
            record = next(gen)
            if isinstance(record, EpochMetrics):
                seconds.append(record.seconds)
            elif isinstance(record, Progress) and record.message.startswith("Training "):
                trainable = record.message.split(" on ")[0].removeprefix("Training ")
    except StopIteration as stop:
        result = stop.value
    return {"acc": result.best_val_acc, "epoch_s": statistics.median(seconds), "trainable": trainable}


def _table(title: str, data: Path, model: str, weights: str | None, runs: Path, epochs: int) -> None:
    print(f"\n{title}, {epochs} epochs\n\n| preset | best val accuracy | s / epoch | trainable |\n|---|---|---|---|")
    for preset in PRESETS:
        row = _run(data, model, weights, preset, runs / preset, epochs)
        print(f"| {preset} | {row['acc']:.3f} | {row['epoch_s']:.2f} | {row['trainable']} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--model", default="auto")
    parser.add_argument("--photos", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ["VITSTUDIO_CACHE_DIR"] = tempfile.mkdtemp(prefix="vitstudio-bench-cache-")
    import torch

    torch.set_num_threads(args.threads)
    from vitstudio.core.models.demo import bundled_demo, render_digits

    tmp = Path(tempfile.mkdtemp(prefix="vitstudio-bench-"))
    model = args.model if args.model != "auto" else str(bundled_demo())
    data = render_digits(tmp / "digits")
    _table(f"{sum(1 for _ in data.rglob('*.png'))} digits, {model}", data, model, None, tmp / "digit-runs",
           args.epochs)
    if args.photos:
        from finetune import make_jpegs
        from finetune_quick import VIT_S, _vit_s_weights

        photos = make_jpegs(tmp / "photos", args.photos)
        _table(f"{args.photos} JPEG photos, ViT-S/16 shape, random weights (times only)", photos, VIT_S,
               _vit_s_weights(tmp), tmp / "photo-runs", args.epochs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
