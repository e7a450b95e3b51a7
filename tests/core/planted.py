"""Folders with planted copies for the duplicate search (tests and tests/benchmarks/folder_anchors.py).

photos: real photos from skimage.data (whole photos, tiles of the large ones and 50 LFW faces at 100 px: 108 distinct
images) in two class folders, plus 30 planted copies of 30 of them, 5 of each kind: exact (the same bytes),
JPEG q60 re-encode, resized to 80 %, 5 % border crop, +15 % brightness, mirrored.
digits: scikit-learn's digits (distinct pixel arrays only), 32×32 like the demo model's data, plus planted exact,
JPEG q60 and resized copies, and labels flipped (moved to a wrong class folder).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

KINDS = ("exact", "jpeg60", "resized80", "crop5", "bright15", "mirror")
SCENES = ["astronaut", "brick", "camera", "cell", "chelsea", "clock", "coffee", "coins", "colorwheel", "grass",
          "gravel", "horse", "hubble_deep_field", "immunohistochemistry", "logo", "microaneurysms", "moon", "page",
          "retina", "rocket", "text"]
TILED = [("astronaut", 2), ("retina", 3), ("hubble_deep_field", 2), ("coffee", 2), ("rocket", 2),
         ("immunohistochemistry", 2), ("camera", 2), ("chelsea", 2)]


def _rgb(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    elif a.dtype != np.uint8:
        a = (255 * (a - a.min()) / (np.ptp(a) + 1e-9)).astype(np.uint8)
    if a.ndim == 2:
        a = np.stack([a] * 3, -1)
    return np.ascontiguousarray(a[..., :3])


def distinct_photos() -> dict[str, np.ndarray]:
    """108 genuinely different images (`skimage.data`'s `cat` is `chelsea`, so it is left out): the caller's own dict
    of read-only arrays, made once a process (~0.7 s of CPU, skimage decoding its files; a test called it up to 4
    times)."""
    return dict(_distinct_photos())


@functools.cache
def _distinct_photos() -> dict[str, np.ndarray]:
    from skimage import data

    out = {name: _rgb(getattr(data, name)()) for name in SCENES}
    for name, k in TILED:  # distinct images of one scene
        a = out[name]
        h, w = a.shape[0] // k, a.shape[1] // k
        for r in range(k):
            for c in range(k):
                out[f"{name}-tile{r}{c}"] = np.ascontiguousarray(a[r * h:(r + 1) * h, c * w:(c + 1) * w])
    faces = data.lfw_subset()
    for i in range(0, 200, 4):
        out[f"face{i:03d}"] = np.asarray(Image.fromarray(_rgb(faces[i])).resize((100, 100), Image.BICUBIC))
    for a in out.values():
        a.setflags(write=False)  # shared by every caller
    return out


def edit(img: Image.Image, kind: str) -> Image.Image:
    """The planted change of one kind ('exact' and 'jpeg60' are made when saving)."""
    if kind == "resized80":
        return img.resize((round(img.width * 0.8), round(img.height * 0.8)), Image.BICUBIC)
    if kind == "crop5":
        dx, dy = round(img.width * 0.05), round(img.height * 0.05)
        return img.crop((dx, dy, img.width - dx, img.height - dy))
    if kind == "bright15":
        return ImageEnhance.Brightness(img).enhance(1.15)
    if kind == "mirror":
        return ImageOps.mirror(img)
    return img


def _plant(source: Path, kind: str, target_dir: Path, stem: str) -> Path:
    if kind == "exact":
        target = target_dir / f"{stem}{source.suffix}"
        shutil.copy(source, target)
        return target
    img = Image.open(source).convert("RGB")
    if kind == "jpeg60":
        target = target_dir / f"{stem}.jpg"
        img.save(target, quality=60)
        return target
    target = target_dir / f"{stem}.png"
    edit(img, kind).save(target)
    return target


def planted_photos(root: Path, per_kind: int = 5, seed: int = 0) -> tuple[Path, list[set[str]], dict[str, str]]:
    """(data folder, planted groups as sets of paths, {copy: kind})."""
    root = Path(root)
    images = distinct_photos()
    files = []
    for k, (name, a) in enumerate(sorted(images.items())):
        folder = root / ("a" if k % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        files.append(folder / f"{name}.jpg")
        Image.fromarray(a).save(files[-1], quality=95)
    rng = np.random.default_rng(seed)
    sources = rng.choice(len(files), per_kind * len(KINDS), replace=False)
    groups, kinds = [], {}
    for n, s in enumerate(sources):
        kind = KINDS[n // per_kind]
        source = files[s]
        other = root / ("a" if source.parent.name == "b" else "b")  # across classes: a leak when split
        copy = _plant(source, kind, other, f"{source.stem}-{kind}")
        groups.append({str(source), str(copy)})
        kinds[str(copy)] = kind
    return root, groups, kinds


def planted_digits(root: Path, per_class: int = 40, copies: int = 6, flips: int = 10, seed: int = 0
                   ) -> tuple[Path, list[set[str]], set[str]]:
    """(data folder, planted copy groups, flipped files): distinct digits in folders 0-9; `copies` each of exact,
    JPEG q60 and resized to 80 % copies; `flips` images moved into a wrong class folder."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    root = Path(root)
    seen, files, count = set(), [], np.zeros(10, int)
    for i, (pixels, label) in enumerate(zip(digits.images, digits.target)):
        key = pixels.tobytes()
        if key in seen or count[label] >= per_class:
            continue
        seen.add(key)
        count[label] += 1
        ink = (255 - pixels / 16.0 * 255).astype(np.uint8)  # as the demo model's data (models/demo.py)
        img = Image.fromarray(ink, "L").resize((32, 32), Image.BILINEAR).convert("RGB")
        (root / str(label)).mkdir(parents=True, exist_ok=True)
        files.append(root / str(label) / f"{i:04d}.png")
        img.save(files[-1])
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(files), 3 * copies + flips, replace=False)
    groups = []
    for n, s in enumerate(picks[:3 * copies]):
        kind = ("exact", "jpeg60", "resized80")[n // copies]
        copy = _plant(files[s], kind, files[s].parent, f"{files[s].stem}-{kind}")
        groups.append({str(files[s]), str(copy)})
    flipped = set()
    for s in picks[3 * copies:]:
        source = files[s]
        wrong = root / str((int(source.parent.name) + int(rng.integers(1, 10))) % 10)
        target = wrong / f"flipped-{source.name}"
        source.rename(target)
        flipped.add(str(target))
    return root, groups, flipped

