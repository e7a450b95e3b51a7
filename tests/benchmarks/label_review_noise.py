"""Shuffle-label experiments behind the label review's caveat (core/folder/label_review.py, MIN_PROBE_ACCURACY):
how far cleanlab's estimated share of wrong labels is from the true share as the probe's out-of-fold accuracy falls.

    python tests/benchmarks/label_review_noise.py [digits|photos|photos-pixels] [--sigmas 0,1,2] [--rates 0,0.05]

Sets: digits = scikit-learn's 1,797 scans, their 64 pixels as the features (10 classes); photos = 240 random crops
(32×32, half mirrored) of skimage.data photos in two classes (astronaut, coffee, chelsea / rocket, Hubble deep
field, immunohistochemistry, retina) through the bundled demo model's pooled features; photos-pixels = the same
crops' pixels. The probe is weakened by Gaussian noise on the features (sigma × the mean feature std), and a share
of the labels (the noise rate) is moved to another class at random. Per row, the mean over two seeds of: the
balanced out-of-fold accuracy the review reports, the share cleanlab flags, flagged minus the true rate (its false
excess), and the flagged images' precision and recall against the moved ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from vitstudio.core.folder.label_review import estimated_wrong, probe_accuracy, review_labels  # noqa: E402

PHOTO_CLASSES = (("astronaut", "coffee", "chelsea"), ("rocket", "hubble_deep_field", "immunohistochemistry", "retina"))


def photo_crops(per_class: int = 120, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    from PIL import Image
    from skimage import data

    rng = np.random.default_rng(seed)
    crops, labels = [], []
    for label, names in enumerate(PHOTO_CLASSES):
        sources = [np.asarray(Image.fromarray(getattr(data, n)()).convert("RGB")) for n in names]
        for i in range(per_class):
            a = sources[i % len(sources)]
            side = int(rng.integers(min(a.shape[:2]) // 5, min(a.shape[:2]) // 2))
            r, c = rng.integers(0, a.shape[0] - side), rng.integers(0, a.shape[1] - side)
            crop = a[r:r + side, c:c + side][:, ::-1 if rng.random() < 0.5 else 1]
            crops.append(np.asarray(Image.fromarray(np.ascontiguousarray(crop)).resize((32, 32), Image.BILINEAR)))
            labels.append(label)
    return crops, np.asarray(labels)


def demo_features(images: list[np.ndarray]) -> np.ndarray:
    import torch
    from PIL import Image

    from vitstudio.core.inference import pooled_and_logits
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    torch.set_num_threads(1)
    loaded = load_model(str(bundled_demo()))
    tensors = [loaded.to_tensor(loaded.crop(Image.fromarray(a).convert("RGB"))) for a in images]
    return np.concatenate([pooled_and_logits(loaded, torch.stack(tensors[s:s + 64]))[0].numpy()
                           for s in range(0, len(tensors), 64)])


def features(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "digits":
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        return x.astype(np.float64), y
    crops, y = photo_crops()
    if name == "photos":
        return demo_features(crops).astype(np.float64), y
    return np.stack([a.reshape(-1) for a in crops]).astype(np.float64), y


def one(x: np.ndarray, y: np.ndarray, sigma: float, rate: float, seed: int) -> dict:
    """One review of features `x` with `sigma` noise and a share `rate` of the labels moved to another class."""
    rng = np.random.default_rng(100 + seed)
    k = int(y.max()) + 1
    noisy_x = x + sigma * x.std(axis=0).mean() * rng.normal(size=x.shape)
    moved = rng.choice(len(y), int(round(rate * len(y))), replace=False)
    given = y.copy()
    given[moved] = (given[moved] + rng.integers(1, k, len(moved))) % k
    issues = review_labels([str(i) for i in range(len(y))], noisy_x, given, [str(c) for c in range(k)], seed=seed)
    flagged = {int(i.path) for i in issues if i.flagged}
    hits = len(flagged & set(moved.tolist()))
    return {"balanced": probe_accuracy(issues).balanced, "flagged": estimated_wrong(issues) / len(y),
            "precision": hits / max(1, len(flagged)), "recall": hits / max(1, len(moved))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", nargs="?", default="digits", choices=("digits", "photos", "photos-pixels"))
    parser.add_argument("--sigmas", default="0,0.5,1,1.5,2,3,4")
    parser.add_argument("--rates", default="0,0.05,0.1,0.2")
    parser.add_argument("--json", action="store_true", help="one JSON line per row instead of the table")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    x, y = features(args.set)
    print(f"{args.set}: {len(y)} images, {int(y.max()) + 1} classes, {x.shape[1]} features")
    print(f"{'sigma':>5} {'moved':>6} | {'bal.acc':>7} {'flagged':>7} {'excess':>7} {'prec':>5} {'recall':>6}")
    for sigma in (float(v) for v in args.sigmas.split(",")):
        for rate in (float(v) for v in args.rates.split(",")):
            rows = [one(x, y, sigma, rate, seed) for seed in (0, 1)]
            m = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
            if args.json:
                print(json.dumps({"set": args.set, "sigma": sigma, "rate": rate, **m}), flush=True)
                continue
            print(f"{sigma:5.2f} {rate:6.0%} | {m['balanced']:7.1%} {m['flagged']:7.1%} {m['flagged'] - rate:+7.1%} "
                  f"{m['precision']:5.2f} {m['recall']:6.2f}", flush=True)


if __name__ == "__main__":
    main()
