"""A small synthetic folder dataset made at run time: coloured squares on noise, one folder per colour."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

COLOURS = {"blue": (40, 60, 220), "green": (40, 200, 60), "red": (220, 40, 40)}


def make_dataset(root: Path, per_class: int = 30, size: int = 32, seed: int = 0, classes=COLOURS) -> Path:
    rng = np.random.default_rng(seed)
    for name, colour in classes.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            img = Image.fromarray(rng.integers(0, 60, (size, size, 3)).astype(np.uint8))
            x, y = rng.integers(2, size // 2, 2)
            side = int(rng.integers(size // 3, size // 2))
            jitter = np.clip(np.array(colour) + rng.integers(-30, 30, 3), 0, 255)
            box = [int(x), int(y), int(x) + side, int(y) + side]
            ImageDraw.Draw(img).rectangle(box, fill=tuple(int(c) for c in jitter))
            img.save(folder / f"{i:03d}.png")
    return root


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and mtime, to prove nothing was written there."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}
