"""Benchmark: folder classification throughput — decoding hidden or not — beside the bare model, one run.

    python tests/benchmarks/folder_decode.py [--model vit_base_patch16_224] [--images 2000] [--batch 256]
                                             [--device auto] [--precision fp32|bf16] [--readers 16]

1. bare    — the model alone on pre-decoded, preprocessed tensors already on the device (the ceiling);
2. pil     — `classify_files(decoder="pil")`: PIL decode + timm eval transform on reader threads;
3. tensor  — `classify_files(decoder="tensor")`: file bytes read by threads, JPEGs decoded as a batch by
             torchvision's decode_jpeg on the model's device (nvJPEG on a GPU), preprocessing as tensor ops.
Goal (GPU): the better path ≥ 0.9× the bare model's throughput (decoding hidden). Also the equivalence of the two
paths on these photos: top-1 agreement and max |Δ logit|. Images: 500×375 JPEGs cut from scikit-image's photos
(noise when scikit-image is missing). Random weights: speed does not depend on them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def make_jpegs(root: Path, n: int) -> list[Path]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    try:
        from skimage import data

        sources = [Image.fromarray(getattr(data, k)()).convert("RGB") for k in ("astronaut", "chelsea", "coffee",
                                                                              "rocket")]
    except ImportError:
        sources = [Image.fromarray(rng.integers(0, 255, (420, 560, 3), dtype=np.uint8)) for _ in range(4)]
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        src = sources[i % 4]
        x, y = (int(v) for v in rng.integers(0, 40, 2))
        img = src.crop((x, y, src.width - 20, src.height - 20)).resize((500, 375))
        paths.append(root / f"{i:05d}.jpg")
        img.save(paths[-1], quality=90)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vit_base_patch16_224")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--readers", type=int, default=None, help="reader threads (default: 4 for PIL, 8 for tensor)")
    args = ap.parse_args()

    import torch

    from vitstudio.core.inference import classify_files, decoded_batches, forward_logits
    from vitstudio.core.models.loading import load_model

    loaded = load_model(args.model, device=args.device, precision=args.precision, pretrained=False)
    files = make_jpegs(Path(tempfile.mkdtemp()) / "jpegs", args.images)
    dev = loaded.device
    print(f"{args.model} on {dev} ({args.precision}), {len(files)} JPEGs 500×375, batch {args.batch}, "
          f"torch {torch.__version__}")

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    x = torch.cat([b.tensor for b in decoded_batches(loaded, files[: args.batch], args.batch, decoder="pil")])
    x = x.to(dev)
    forward_logits(loaded, x)  # warm-up
    sync()
    t = time.perf_counter()
    for _ in range(max(1, len(files) // args.batch)):
        forward_logits(loaded, x)
    sync()
    bare = max(1, len(files) // args.batch) * args.batch / (time.perf_counter() - t)

    def run(decoder: str) -> tuple[float, list]:
        list(classify_files(loaded, files[: args.batch], batch_size=args.batch, decoder=decoder,
                            readers=args.readers))  # warm-up (cuDNN/nvJPEG init, page cache)
        sync()
        t = time.perf_counter()
        preds = [p for batch in classify_files(loaded, files, batch_size=args.batch, decoder=decoder,
                                               readers=args.readers) for p in batch]
        sync()
        return len(files) / (time.perf_counter() - t), preds

    pil, pil_preds = run("pil")
    tensor, tensor_preds = run("tensor")
    print(f"  bare model on pre-decoded tensors  {bare:9.1f} img/s  (ceiling)")
    print(f"  PIL decode + transform (threads)   {pil:9.1f} img/s  ratio {pil / bare:5.2f} of bare")
    print(f"  tensor decode on the device        {tensor:9.1f} img/s  ratio {tensor / bare:5.2f} of bare, "
          f"{tensor / pil:5.2f}× PIL")
    agree = sum(a.indices[0] == b.indices[0] for a, b in zip(pil_preds, tensor_preds)) / len(files)
    sample = files[: min(64, len(files))]
    a = torch.cat([b.tensor for b in decoded_batches(loaded, sample, 64, decoder="pil")]).to(dev)
    b = torch.cat([b.tensor for b in decoded_batches(loaded, sample, 64, decoder="tensor")])
    delta = (forward_logits(loaded, a) - forward_logits(loaded, b)).abs().max().item()
    print(f"  equivalence tensor vs PIL: top-1 agreement {agree:.2%} over {len(files)} images, max |Δ logit| "
          f"{delta:.2e} over {len(sample)}")
    print(f"  goal: best path ≥ 0.9× bare → {max(pil, tensor) / bare:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
