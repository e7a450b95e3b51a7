"""The bundled demo model: a small ViT trained from scratch, with this engine, on scikit-learn's handwritten
digits (1,797 real 8×8 scans, shipped offline), rendered to a folder dataset.

Reproduce with `vitstudio demo-model --out models/digits-vit` (needs scikit-learn).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from vitstudio.core.files import installed_shares

DEMO_NAME = "digits-vit"
DEMO_SPEC = "custom:img=32,patch=4,width=64,depth=4,heads=4,classes=10"  # 8×8 patch grid, 65 tokens
DEMO_SIZE = 32
PROJECT_ROOT = Path(__file__).resolve().parents[3]
# A checkout has the demo and the sample images at its top level; an installed wheel carries them as data files
# (pyproject's data-files) under share/vitstudio/{models/digits-vit, samples} of the prefix it was installed to.


def bundled_demo() -> Path | None:
    """The demo model folder shipped with the project (a checkout's models/, else the installed copy), if present."""
    shipped = (PROJECT_ROOT / "models", *(share / "models" for share in installed_shares()))
    for folder in (models / DEMO_NAME for models in shipped):
        if (folder / "model.safetensors").is_file():
            return folder
    return None


DEMO_TITLE = "Digits demo (bundled)"


def friendly_name(spec: str) -> str:
    """What people read for a model spec: the bundled demo by its title, anything else as given."""
    demo = bundled_demo()
    try:
        if demo is not None and Path(spec).resolve() == demo.resolve():
            return DEMO_TITLE
    except (OSError, ValueError):
        pass
    return spec


def sample_images() -> list[Path]:
    """The sample digits a first start opens (a checkout's resources/samples, else the installed copy)."""
    for folder in (PROJECT_ROOT / "resources" / "samples", *(share / "samples" for share in installed_shares())):
        found = sorted(folder.glob("*.png"))
        if found:
            return found
    return []


@lru_cache(maxsize=1)
def digit_scans() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 8, 8) of ink density 0..16, labels (1797,)), read-only: scikit-learn's `load_digits`, read from
    the data file it ships without importing scikit-learn (sklearn.datasets pulls in scipy.stats and pandas: ~1.5 s of
    CPU at the end of every training run, which measures its score on these digits). Parsed once a process (~25 ms
    of loadtxt, which every run's end paid again)."""
    import gzip
    from importlib.util import find_spec

    spec = find_spec("sklearn")  # a top-level package is found, not run
    images = labels = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        data = Path(folder) / "datasets" / "data" / "digits.csv.gz"
        if data.is_file():
            with gzip.open(data, "rt", encoding="utf-8") as f:
                table = np.loadtxt(f, delimiter=",")  # as sklearn.datasets.load_digits reads it
            images, labels = table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)
            break
    if images is None:
        from sklearn.datasets import load_digits

        digits = load_digits()
        images, labels = digits.images.copy(), digits.target.copy()
    images.setflags(write=False)  # shared by every caller
    labels.setflags(write=False)
    return images, labels


def render_digits(folder: str | Path, per_class: int | None = None) -> Path:
    """Write load_digits as 32×32 grey PNGs in one folder per digit (dark ink on white, like a scan); `per_class`:
    only the first that many of each digit (file names keep their index in the whole set)."""
    folder = Path(folder)
    images, labels = digit_scans()
    written: dict[int, int] = {}
    for i, (pixels, label) in enumerate(zip(images, labels)):
        if per_class is not None and written.get(int(label), 0) >= per_class:
            continue
        written[int(label)] = written.get(int(label), 0) + 1
        ink = (255 - pixels / 16.0 * 255).astype(np.uint8)  # 0..16 ink density -> white paper, dark ink
        img = Image.fromarray(ink, "L").resize((DEMO_SIZE, DEMO_SIZE), Image.BILINEAR).convert("RGB")
        out = folder / str(label)
        out.mkdir(parents=True, exist_ok=True)
        img.save(out / f"{i:04d}.png")
    return folder
