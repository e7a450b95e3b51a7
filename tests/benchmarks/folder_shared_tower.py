"""Benchmark: a folder opened again with a quick run of the model that embedded it (the label / fit a head in
seconds / use it loop). The folder cache is keyed by the image tower, so the run reads the base model's cached
features and computes its logits with its head; the reference is the same run embedding the folder into a cache of
its own (every image through the model), in the same process.

    python tests/benchmarks/folder_shared_tower.py [--images-per-class 40]

ViT-S/16 with random weights (speed does not depend on them) on synthetic 64-px images, 2 threads.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images-per-class", type=int, default=40)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    os.environ["VITSTUDIO_CACHE_DIR"] = str(tmp / "cache")  # the user's own caches are never touched
    os.environ["VITSTUDIO_MODELS_DIR"] = str(tmp / "models")
    import numpy as np
    import timm
    import torch
    from timm.models import save_for_hf

    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.data.images import read_image
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    torch.set_num_threads(2)
    torch.manual_seed(0)
    base_dir = tmp / "vit-s"
    save_for_hf(timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=10), str(base_dir),
                model_config={"label_names": [str(i) for i in range(10)]}, safe_serialization=True)
    data = make_dataset(tmp / "data", per_class=args.images_per_class, size=64)
    base = load_model(str(base_dir), device="cpu")
    started = time.perf_counter()
    drain(embed_folder(base, [str(data)]))
    cold = time.perf_counter() - started
    drain(fine_tune(make_config(data, str(base_dir), tmp / "run", "quick", epochs=20, device="cpu")))
    run = load_model(str(tmp / "run"), device="cpu")
    started = time.perf_counter()
    shared = drain(embed_folder(run, [str(data)]))
    ours = time.perf_counter() - started
    started = time.perf_counter()
    own = drain(embed_folder(run, [str(data)], root=tmp / "own-cache"))
    reference = time.perf_counter() - started
    print(f"{len(shared.paths)} images; the base model's first embedding: {cold:.2f} s")
    print(f"quick run, shared image-tower cache: {ours:.3f} s ({shared.computed} computed) | reference, its own "
          f"cache: {reference:.2f} s ({own.computed} computed) | ratio {reference / ours:.0f}x")
    x = torch.stack([run.to_tensor(run.crop(read_image(p))) for p in shared.paths[:8]])
    with torch.no_grad():
        forward = run.model(x).numpy()
    print(f"max |logit - forward| over 8 images: {np.abs(shared.logits[shared.rows[:8]] - forward).max():.2e}")


if __name__ == "__main__":
    main()
