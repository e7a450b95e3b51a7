"""ViT Studio's folder audit side by side with the anchors on the same planted folders (`folder.py --anchors`).

    python tests/benchmarks/folder_anchors.py            (needs `pip install 'vitstudio[anchors]'`: imagededup)

photos: 108 distinct real images (skimage.data photos, tiles, LFW faces) + 30 planted copies, 5 each of exact, JPEG
q60, resized 80 %, 5 % border crop, +15 % brightness, mirrored (tests/core/planted.py). digits: distinct digits
(40 a class) + 18 planted copies (exact, JPEG q60, resized 80 %) and 10 flipped labels. Model: the bundled digits
ViT (it packs photos close: the hard case for a feature threshold).

Duplicates: a found pair is any two files of one group; recall = planted pairs found / planted; false pairs = the
found pairs that were not planted. imagededup: PHash (its `find_duplicates`) at its default max distance 10 (= ours)
and at 6 and 14. Labels: top-k precision (k = flipped) of ViT Studio's ranking and of cleanlab's own
`find_label_issues` ranking on the same out-of-sample probabilities, and how many cleanlab flags.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def drain(gen):
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def _pairs_of_groups(groups) -> set[frozenset]:
    out = set()
    for g in groups:
        members = sorted(set(g.paths) | {c for v in g.copies.values() for c in v})
        out |= {frozenset((a, b)) for k, a in enumerate(members) for b in members[k + 1:]}
    return out


def _score(name: str, pairs: set[frozenset], planted: list[set[str]], kinds: dict[str, str], seconds: float) -> None:
    truth = {frozenset(g) for g in planted}
    hit = pairs & truth
    per_kind: dict[str, list[int]] = {}
    for g in planted:
        kind = next((kinds[p] for p in g if p in kinds), "?")
        per_kind.setdefault(kind, [0, 0])
        per_kind[kind][0] += frozenset(g) in hit
        per_kind[kind][1] += 1
    detail = " ".join(f"{k} {a}/{b}" for k, (a, b) in per_kind.items())
    print(f"  {name:<38} recall {len(hit):>3}/{len(truth):<3} false pairs {len(pairs - truth):>5}  "
          f"{seconds:7.2f} s   {detail}")


def imagededup_pairs(files: list[str], distance: int, encodings: dict | None = None) -> tuple[set, dict, float]:
    from imagededup.methods import PHash

    hasher = PHash(verbose=False)
    logging.disable(logging.INFO)  # imagededup logs every search at INFO
    t = time.perf_counter()
    if encodings is None:
        encodings = {f: hasher.encode_image(image_file=f) for f in files}
    found = hasher.find_duplicates(encoding_map=encodings, max_distance_threshold=distance)
    seconds = time.perf_counter() - t
    logging.disable(logging.NOTSET)
    return {frozenset((a, b)) for a, bs in found.items() for b in bs}, encodings, seconds


def duplicates_side_by_side(title: str, data: Path, planted: list[set[str]], kinds: dict[str, str], loaded) -> None:
    from vitstudio.core.folder.audit import audit
    from vitstudio.core.folder.duplicates import HASH_DISTANCE

    files = sorted(str(p) for p in data.rglob("*") if p.is_file())
    print(f"\n{title}: {len(files)} files, {len(planted)} planted copies")
    for name, model in (("ViT Studio, no model", None), ("ViT Studio + bundled digits model", loaded)):
        t = time.perf_counter()
        report = drain(audit(data, model))
        _score(name + " (whole audit)", _pairs_of_groups(report.groups), planted, kinds, time.perf_counter() - t)
    from vitstudio.core.folder.duplicates import find_groups
    from vitstudio.core.folder.fingerprints import fingerprints

    t = time.perf_counter()  # the duplicate search alone (features from the cache, as imagededup hashes files)
    groups, _, _ = find_groups(files, fingerprints(files), _features_of(files), np.arange(len(files)))
    _score("ViT Studio duplicates only (+ model)", _pairs_of_groups(groups), planted, kinds,
           time.perf_counter() - t)
    th = report.thresholds
    print(f"    thresholds: phash ≤ {th.hash_distance}, pixels ≥ {th.pixels:.4f}, cosine ≥ {th.cosine:.5f} "
          f"(model packs images: {th.packed})")
    try:
        encodings = None
        for distance in (10, 6, 14):
            pairs, encodings, seconds = imagededup_pairs(files, distance, encodings)
            label = "default = ours" if distance == 10 == HASH_DISTANCE else "default" if distance == 10 else ""
            _score(f"imagededup PHash ≤ {distance} {label}".rstrip(), pairs, planted, kinds, seconds)
    except ImportError:
        print("  imagededup not installed (pip install 'vitstudio[anchors]')")
    return report


def labels_side_by_side(report, flipped: set[str]) -> None:
    """Top-k precision of ViT Studio's ranking and cleanlab's, on the same out-of-sample probabilities."""
    from cleanlab.filter import find_label_issues

    from vitstudio.core.folder.label_review import out_of_sample_probabilities

    k = len(flipped)
    ours = {i.path for i in report.label_issues[:k]}
    print(f"\nlabels ({k} flipped of {report.images})")
    print(f"  ViT Studio review                      top-{k} precision {len(ours & flipped) / k:.2f}")
    paths = [i.path for i in report.label_issues]
    classes = sorted({i.given for i in report.label_issues})
    labels = np.asarray([classes.index(i.given) for i in report.label_issues])
    features = _features_of(paths)
    t = time.perf_counter()
    probs = out_of_sample_probabilities(features, labels)
    ranked = find_label_issues(labels, probs, return_indices_ranked_by="self_confidence")
    seconds = time.perf_counter() - t
    top = {paths[i] for i in ranked[:k]}
    print(f"  cleanlab find_label_issues             top-{k} precision {len(top & flipped) / k:.2f}  "
          f"flagged {len(ranked)} ({len({paths[i] for i in ranked} & flipped)} right)  {seconds:.2f} s")


_LOADED = {}


def _features_of(paths: list[str]) -> np.ndarray:
    from vitstudio.core.folder.embedcache import embed_folder

    result = drain(embed_folder(_LOADED["model"], paths, 64))
    where = {p: i for i, p in enumerate(result.paths)}
    return result.features_of()[[where[p] for p in paths]]


def main() -> int:
    work = Path(tempfile.mkdtemp())
    os.environ.setdefault("VITSTUDIO_CACHE_DIR", str(work / "cache"))
    from tests.core.planted import planted_digits, planted_photos
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    loaded = load_model(str(bundled_demo()), device="cpu")
    _LOADED["model"] = loaded
    data, planted, kinds = planted_photos(work / "photos")
    duplicates_side_by_side("photos", data, planted, kinds, loaded)
    data, planted, flipped = planted_digits(work / "digits")
    kinds = {c: Path(c).stem.rsplit("-", 1)[1] for g in planted for c in g if "-" in Path(c).stem}
    report = duplicates_side_by_side("digits", data, planted, kinds, loaded)
    labels_side_by_side(report, flipped)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
