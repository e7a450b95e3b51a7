"""A folder with a planted concept (tests/core/test_concepts.py and tests/benchmarks/concepts.py).

scikit-learn's digits, grey on a tinted background at `size` px; on half of them (the `marked/` class folder) a
magenta square one patch wide sits on a random patch of the grid. A model fine-tuned to tell marked from plain
images (`fine_tuned`) then has a reason to carry the mark in its tokens; the SAE should give it a concept.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

MARK = (255, 0, 255)


def planted_folder(root: Path, count: int = 240, size: int = 32, patch: int = 8, seed: int = 0
                   ) -> dict[str, tuple[int, int] | None]:
    """Writes root/marked/*.png and root/plain/*.png; returns {path: the mark's (row, col) on the patch grid or
    None}."""
    from sklearn.datasets import load_digits

    digits = load_digits().images
    rng = np.random.default_rng(seed)
    grid = size // patch
    marks: dict[str, tuple[int, int] | None] = {}
    for i in range(count):
        digit = np.asarray(Image.fromarray((digits[i % len(digits)] * 15).astype(np.uint8)).resize((size, size)))
        tint = rng.uniform(0.3, 0.8, 3)
        img = (40 + digit[..., None] * tint).clip(0, 255).astype(np.uint8)
        where = None
        if i % 2 == 0:
            where = (int(rng.integers(grid)), int(rng.integers(grid)))
            img[where[0] * patch:(where[0] + 1) * patch, where[1] * patch:(where[1] + 1) * patch] = MARK
        folder = root / ("marked" if where else "plain")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{i:04d}.png"
        Image.fromarray(img).save(path)
        marks[str(path)] = where
    return marks


def fine_tuned(loaded, marks: dict, epochs: int = 8, seed: int = 0):
    """`loaded` (two classes: 0 marked, 1 plain, as the folders sort) trained in place to tell them apart; returns
    its accuracy on the images it was trained on."""
    torch.manual_seed(seed)
    x = torch.stack([loaded.to_tensor(loaded.crop(Image.open(p).convert("RGB"))) for p in marks])
    y = torch.tensor([0 if m else 1 for m in marks.values()])
    model = loaded.model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for _ in range(epochs):
        for i in torch.randperm(len(x)).split(32):
            loss = torch.nn.functional.cross_entropy(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())
