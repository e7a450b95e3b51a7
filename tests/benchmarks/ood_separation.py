"""How well the out-of-distribution score separates a model's validation images from the standard outside set
(core/train/ood_separation.py), per kind: its AUROC and the share of each kind flagged at the bank's threshold.

    python tests/benchmarks/ood_separation.py [--epochs 6] [--photos-per-class 120]

Models: the bundled digits demo (its shipped bank, its own validation split re-rendered) and a run fine-tuned here
(preset full, from the demo) on 32×32 crops of skimage.data photos in two classes (the label-review benchmark's
crops, tests/benchmarks/label_review_noise.py): the issue's "demo fine-tuned on ants and bees" made offline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from tests.benchmarks.label_review_noise import photo_crops  # noqa: E402
from tests.core.generators import drain  # noqa: E402
from vitstudio.core.models import ood  # noqa: E402
from vitstudio.core.models.demo import bundled_demo, render_digits  # noqa: E402
from vitstudio.core.models.loading import load_model  # noqa: E402
from vitstudio.core.train import ood_separation as sep  # noqa: E402
from vitstudio.core.train.ood_fit import features_of  # noqa: E402


def report(title: str, folder: Path, val_paths: list[Path], classes: list[str]) -> None:
    loaded, bank = load_model(str(folder)), ood.read_bank(folder)
    val = bank.scores(drain(features_of(loaded, val_paths)))
    images = []
    for p in val_paths[:sep.PER_KIND]:
        images.append(Image.open(p).convert("RGB"))
    print(f"\n{title}: {len(val)} validation images, threshold {bank.threshold:.3f}, k {bank.k}, "
          f"{'digits are its own data' if sep.learned_digits(classes) else 'digits are outside'}")
    print(f"  {'kind':15s} {'AUROC':>6s} {'flagged':>8s} {'median score':>13s}")
    print(f"  {'validation':15s} {'':>6s} {np.mean(val > bank.threshold):8.0%} {np.median(val):13.3f}")
    for kind, imgs in sep.outside_images(images).items():
        scores = bank.scores(sep.image_features(loaded, imgs))
        a = sep.auroc(val, scores)
        print(f"  {kind:15s} {a:6.3f} {np.mean(scores > bank.threshold):8.0%} {np.median(scores):13.3f}")
    verdict = {True: "separates", False: "cannot tell", None: "not measured"}[bank.separates]
    print(f"  stored with the bank: lowest deciding AUROC {bank.auroc} (rotated copies not deciding, "
          f"minimum {ood.MIN_AUROC}): {verdict}")


def photo_run(root: Path, epochs: int, per_class: int) -> tuple[Path, list[Path], list[str]]:
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    crops, labels = photo_crops(per_class)
    data = root / "photos"
    for i, (crop, label) in enumerate(zip(crops, labels)):
        (data / f"class{label}").mkdir(parents=True, exist_ok=True)
        Image.fromarray(crop).save(data / f"class{label}" / f"{i:04d}.png")
    result = drain(fine_tune(make_config(str(data), str(bundled_demo()), str(root / "run"), "full", epochs=epochs,
                                         batch_size=32)))
    split = json.loads((result.out_dir / "split.json").read_text())
    print(f"photo run: best validation accuracy {result.best_val_acc:.1%}")
    return result.out_dir, [Path(split["root"]) / p for p, _ in split["val"]], split["classes"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--photos-per-class", type=int, default=120)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp())
    demo = bundled_demo()
    split = json.loads((demo / "split.json").read_text())
    digits = render_digits(root / "digits")
    report("digits demo", demo, [digits / p for p, _ in split["val"]], split["classes"])
    report("photo run", *photo_run(root, args.epochs, args.photos_per_class))


if __name__ == "__main__":
    main()
