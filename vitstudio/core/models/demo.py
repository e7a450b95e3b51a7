"""The bundled demo model: a small ViT trained from scratch, with this engine, on scikit-learn's handwritten
digits (1,797 real 8×8 scans, shipped offline), rendered to a folder dataset.

Reproduce with `vitstudio demo-model --out models/digits-vit` (needs scikit-learn).
"""

from __future__ import annotations

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


def render_digits(folder: str | Path, per_class: int | None = None) -> Path:
    """Write load_digits as 32×32 grey PNGs in one folder per digit (dark ink on white, like a scan); `per_class`:
    only the first that many of each digit (file names keep their index in the whole set)."""
    from sklearn.datasets import load_digits

    folder = Path(folder)
    digits = load_digits()
    written: dict[int, int] = {}
    for i, (pixels, label) in enumerate(zip(digits.images, digits.target)):
        if per_class is not None and written.get(int(label), 0) >= per_class:
            continue
        written[int(label)] = written.get(int(label), 0) + 1
        ink = (255 - pixels / 16.0 * 255).astype(np.uint8)  # 0..16 ink density -> white paper, dark ink
        img = Image.fromarray(ink, "L").resize((DEMO_SIZE, DEMO_SIZE), Image.BILINEAR).convert("RGB")
        out = folder / str(label)
        out.mkdir(parents=True, exist_ok=True)
        img.save(out / f"{i:04d}.png")
    return folder
