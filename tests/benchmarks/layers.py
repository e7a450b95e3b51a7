"""Benchmark: probes on every block against one probe of the final layer, and CKA per pair of blocks (issue 33).

    python tests/benchmarks/layers.py [--model models/digits-vit] [--images 1797]

Data: scikit-learn's digits rendered as the demo's folder (all 1,797 by default). Both sides start from an empty
cache and read the folder once: ours reads every block's feature in one pass (`embed_layers`) and fits a 5-fold probe
per block; the reference embeds the folder's pooled features (`embed_folder`, what the quick preset reads) and fits
the same 5-fold probe on the final layer only. Goal: all blocks ≤ 2× the one probe (the forward is shared). CKA:
linear and minibatch (batches of 256) on the cached features, seconds per pair of blocks.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _drain(gen):
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(Path(__file__).resolve().parents[2] / "models" / "digits-vit"))
    parser.add_argument("--images", type=int, default=1797)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="layers-bench-"))
    os.environ["VITSTUDIO_CACHE_DIR"] = str(work / "cache")
    from vitstudio.core.analysis.cka import linear_cka_matrix, minibatch_cka_matrix
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.folder.layer_cache import embed_layers
    from vitstudio.core.models.demo import render_digits
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.train.layer_probes import fold_ids, labelled_files, probe_accuracy, probe_layers

    folder = render_digits(work / "digits", per_class=max(2, args.images // 10))
    loaded = load_model(args.model)
    files, classes = labelled_files(folder)
    started = time.perf_counter()
    probes = _drain(probe_layers(loaded, folder))
    ours = time.perf_counter() - started

    started = time.perf_counter()  # the reference: the final layer's pooled features, one probe
    embedded = _drain(embed_folder(loaded, [str(p) for p, _ in files]))
    label_of = {str(p): c for p, c in files}
    labels = np.asarray([label_of[p] for p in embedded.paths])
    one = probe_accuracy(embedded.features_of(), labels, fold_ids(labels, probes.folds), len(classes)).mean()
    reference = time.perf_counter() - started

    print(f"{probes.images} digits, {loaded.display_name}, {probes.folds}-fold probes")
    print(f"{'':28}{'seconds':>9}{'accuracy':>10}")
    print(f"{'every block (ours)':28}{ours:9.2f}{probes.accuracy[-1]:10.4f}")
    print(f"{'final layer only (reference)':28}{reference:9.2f}{one:10.4f}")
    print(f"ratio {ours / reference:.2f} for {len(probes.accuracy)} blocks (goal ≤ 2)")
    print("probe accuracy per block:", " ".join(f"{a:.4f}" for a in probes.accuracy))
    if probes.lens_accuracy is not None:
        print("lens accuracy per block: ", " ".join(f"{a:.4f}" for a in probes.lens_accuracy))

    layers = _drain(embed_layers(loaded, [str(p) for p, _ in files]))
    feats = [layers.block(i) for i in range(layers.blocks)]
    pairs = layers.blocks ** 2
    for name, fn in (("linear CKA", lambda: linear_cka_matrix(feats, feats)),
                     ("minibatch CKA (256)", lambda: minibatch_cka_matrix(feats, feats, 256))):
        started = time.perf_counter()
        fn()
        seconds = time.perf_counter() - started
        print(f"{name}: {seconds / pairs * 1000:.2f} ms per pair of blocks ({pairs} pairs, {len(feats[0])} images, "
              f"width {feats[0].shape[1]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
