"""Benchmark: the embedding cache's cost per new image does not grow with what the cache already holds.

    python tests/benchmarks/folder_cache.py [--new 2000] [--existing 50000]
    (also run by tests/benchmarks/folder.py, or alone there with --cache)

Two figures, each for `--new` images into an empty cache and into one already holding `--existing` rows:
- embed: CPU seconds per image (this process, all threads) of `embed_folder` on new generated 64×64 JPEGs through
  a small ViT (decode + forward + cache writes);
- cache writes alone: CPU per image of appending the same number of rows (features + logits, batches of 32, the
  content hash included) without a model, where the index cost would show undiluted;
and the audit's fingerprints (perceptual hashes + thumbnails) of the new images, a first and a second time.
The existing rows are synthetic (tiny files, random features) written through the cache's own API.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _prefill(cache, folder: Path, n: int, batch: int = 5000) -> None:
    """n synthetic rows: tiny distinct files with random features, appended in large batches."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    dim, classes = cache.loaded.model.num_features, len(cache.loaded.labels)
    for start in range(0, n, batch):
        names = []
        for i in range(start, min(n, start + batch)):
            path = folder / f"{i:07d}.bin"
            path.write_bytes(i.to_bytes(8, "little"))
            names.append(path)
        cache.append(names, rng.standard_normal((len(names), dim), dtype=np.float32),
                     rng.standard_normal((len(names), classes), dtype=np.float32))


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def cache_scaling(work: Path, loaded, new: int = 2000, existing: int = 50_000) -> dict:
    from tests.benchmarks.folder import drain, make_images
    from vitstudio.core.folder.embedcache import EmbeddingCache, embed_folder

    data = work / "cache-bench-data"
    make_images(data, new, seed=1)
    files = sorted(data.rglob("*.jpg"))
    caches = {"empty": work / "cache-empty", f"{existing // 1000}k": work / "cache-full"}
    _prefill(EmbeddingCache(loaded, caches[f"{existing // 1000}k"]), work / "cache-bench-filler", existing)
    drain(embed_folder(loaded, [str(p) for p in files[:64]], 32, root=work / "cache-warmup"))  # torch's first run
    out = {}
    for name, root in caches.items():  # the model run: every new file decoded, embedded and cached
        out[("embed", name)] = _cpu(lambda root=root: drain(embed_folder(loaded, [str(data)], 32, root=root)))
    rng = np.random.default_rng(1)
    feats = rng.standard_normal((len(files), loaded.model.num_features), dtype=np.float32)
    logits = rng.standard_normal((len(files), len(loaded.labels)), dtype=np.float32)
    for name, root in caches.items():  # the cache writes alone: same files again, under a fresh fingerprint
        cache = EmbeddingCache(loaded, root)
        seconds = _cpu(lambda cache=cache: [cache.append(files[s:s + 32], feats[s:s + 32], logits[s:s + 32])
                                            for s in range(0, len(files), 32)])
        out[("writes", name)] = seconds
    n = len(files)
    print(f"\ncache: {n} new images into an empty cache and into one holding {existing} rows (CPU per image)")
    for what, label in (("embed", "embed_folder (decode + model + cache)"),
                        ("writes", "cache writes alone (batches of 32)")):
        empty, full = out[(what, "empty")], out[(what, f"{existing // 1000}k")]
        print(f"  {label:<40} empty {empty / n * 1000:7.3f} ms   {existing // 1000}k {full / n * 1000:7.3f} ms   "
              f"ratio {full / empty:5.2f}")
    from vitstudio.core.folder.fingerprintcache import cached_fingerprints

    first = _cpu(lambda: cached_fingerprints([str(f) for f in files], work / "fingerprints"))
    second = _cpu(lambda: cached_fingerprints([str(f) for f in files], work / "fingerprints"))
    out["fingerprints"] = (first, second)
    print(f"  {'fingerprints (hashes + thumbnails)':<40} first audit {first / n * 1000:7.3f} ms   second "
          f"{second / n * 1000:7.3f} ms (from the cache)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--new", type=int, default=2000)
    ap.add_argument("--existing", type=int, default=50_000)
    args = ap.parse_args()
    import os

    from tests.benchmarks.folder import MODEL
    from vitstudio.core.models.loading import load_model

    work = Path(tempfile.mkdtemp())
    os.environ["VITSTUDIO_CACHE_DIR"] = str(work / "cache")
    cache_scaling(work, load_model(MODEL, device="cpu"), args.new, args.existing)
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
