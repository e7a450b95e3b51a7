"""How well a run's out-of-distribution score (core/models/ood.py) tells its own images from images it never saw,
measured at the end of the run on its validation split: the AUROC of the score between the validation images and
a fixed set of outside images of each kind below. A threshold alone (the 95th percentile of the validation scores)
says nothing about that: a small model fine-tuned on photos scored handwritten digits under it.

Outside kinds (`OUTSIDE_KINDS`): uniform noise, flat frames, the demo's digits (scikit-learn's scans rendered as
the demo model's data; left out for a run that learned digits), and copies of the run's own validation images
rotated a quarter, half or three-quarter turn, or colour-shifted (channels rolled and brightness inverted). The
bank keeps every kind's AUROC; its verdict rests on the weakest kind (ood.MIN_AUROC), rotated copies left out of it
(ood.NEAR_KINDS).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel

OUTSIDE_KINDS = ("noise", "flat", "digits", "rotated", "colour-shifted")
PER_KIND = 24  # images of each kind: the AUROC's standard error stays under ~0.05 against ~50 validation images


def auroc(inside: np.ndarray, outside: np.ndarray) -> float:
    """P(an outside image scores higher than an inside one), ties counted half (Mann-Whitney U / (n·m))."""
    inside, outside = np.asarray(inside, np.float64), np.asarray(outside, np.float64)
    ranks = _ranks(np.concatenate([inside, outside]))
    u = ranks[len(inside):].sum() - len(outside) * (len(outside) + 1) / 2
    return float(u / (len(inside) * len(outside)))


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their mean rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    uniq, inverse = np.unique(values, return_inverse=True)
    return (np.bincount(inverse, ranks) / np.bincount(inverse))[inverse]


def learned_digits(classes: Sequence[str]) -> bool:
    """A run whose classes are all digits learned digits: the demo's digits are no outside images to it."""
    return all(str(c).strip() in "0123456789" and str(c).strip() for c in classes)


def _digits(count: int, rng: np.random.Generator) -> list[Image.Image]:
    from vitstudio.core.models.demo import DEMO_SIZE, digit_scans

    scans = digit_scans()[0]
    out = []
    for i in rng.choice(len(scans), count, replace=False):
        ink = (255 - scans[i] / 16.0 * 255).astype(np.uint8)  # as demo.render_digits draws them
        out.append(Image.fromarray(ink, "L").resize((DEMO_SIZE, DEMO_SIZE), Image.BILINEAR).convert("RGB"))
    return out


def _copies(val_images: Sequence[Image.Image], count: int, kind: str) -> list[Image.Image]:
    out = []
    for i in range(count):
        img = np.asarray(val_images[i % len(val_images)].convert("RGB"))
        if kind == "rotated":
            out.append(Image.fromarray(np.ascontiguousarray(np.rot90(img, 1 + i % 3))))
        else:
            out.append(Image.fromarray(np.ascontiguousarray(255 - img[..., [1, 2, 0]])))
    return out


def outside_images(val_images: Sequence[Image.Image], kinds: Sequence[str] = OUTSIDE_KINDS,
                   per_kind: int = PER_KIND, seed: int = 0) -> dict[str, list[Image.Image]]:
    """{kind: images}: the standard outside set, its copies made from `val_images` (the run's validation images)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[Image.Image]] = {}
    for kind in kinds:
        if kind == "noise":  # sizes from the input's to a photo's: a big one is averaged towards grey by the resize
            sides = rng.integers(32, 320, per_kind)
            out[kind] = [Image.fromarray(rng.integers(0, 256, (s, s, 3), dtype=np.uint8)) for s in sides]
        elif kind == "flat":  # black, white, grey and random colours
            colours = [(0, 0, 0), (255, 255, 255), (128, 128, 128)] + [tuple(c) for c in
                                                                       rng.integers(0, 256, (per_kind - 3, 3))]
            out[kind] = [Image.new("RGB", (64, 64), tuple(int(v) for v in c)) for c in colours]
        elif kind == "digits":
            out[kind] = _digits(per_kind, rng)
        elif val_images:
            out[kind] = _copies(val_images, per_kind, kind)
    return out


def image_features(loaded: LoadedModel, images: Sequence[Image.Image], batch_size: int = 32) -> np.ndarray:
    """(n, D) pooled features of in-memory images, through the model's own crop and normalisation."""
    import torch

    from vitstudio.core.inference import pooled_and_logits

    rows = []
    for start in range(0, len(images), batch_size):
        batch = torch.stack([loaded.to_tensor(loaded.crop(img)) for img in images[start:start + batch_size]])
        rows.append(pooled_and_logits(loaded, batch)[0].numpy())
    return np.concatenate(rows) if rows else np.zeros((0, getattr(loaded.model, "num_features", 0)), np.float32)


def measure_separation(loaded: LoadedModel, bank, val_paths: Sequence[str | Path], val_scores: np.ndarray,
                       classes: Sequence[str], seed: int = 0,
                       cancel: CancelToken | None = None) -> Iterator[Progress]:
    """Generator: yields Progress, returns {kind: AUROC of the bank's score, validation images vs that kind}."""
    from vitstudio.core.data.images import ImageReadError, read_image

    if len(val_scores) == 0:  # no validation images: nothing to measure against
        return {}
    val_images = []
    for path in list(val_paths)[:PER_KIND]:
        try:
            val_images.append(read_image(path))
        except ImageReadError:
            continue
    kinds = [k for k in OUTSIDE_KINDS if not (k == "digits" and learned_digits(classes))]
    separation = {}
    for done, (kind, images) in enumerate(outside_images(val_images, kinds, seed=seed).items()):
        if cancel is not None and cancel.cancelled:
            break
        yield Progress(done, len(kinds), "How well the out-of-distribution score separates outside images")
        separation[kind] = auroc(val_scores, bank.scores(image_features(loaded, images)))
    return separation
