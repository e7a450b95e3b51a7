"""Duplicate groups that are copies, and the groups that leak across a train/val split.

- exact: identical bytes (the full SHA-256 of the file), nothing else;
- near: two images are near-duplicates when at least two independent signals agree:
    phash     the 64-bit perceptual hashes (or the hash of the mirrored image) differ in ≤ `hash_distance` bits;
    pixels    the 16×16 grey thumbnails (or the mirrored one) correlate far above how this folder's images
              correlate with their nearest neighbour;
    embedding the model's pooled features: cosine far above this folder's typical nearest-neighbour cosine.
  "Far above" is calibrated per (model, folder): a copy is an outlier of the distribution of each image's
  nearest-neighbour distance, so the cut is that distance's median / CLOSER (10×). One signal alone is never
  enough: perceptual hashes of distinct handwritten digits differ in 2-6 bits, a classifier's features put a whole
  class within cosine 0.99 and distinct photos within 0.997; two of them agreeing on a distinct pair is what the
  measurements (tests/benchmarks/folder_anchors.py) never saw.
- groups without chaining: each near group is a clique (every member a near-duplicate of every other, greedy from
  the best-connected image), so a group cannot grow through a chain of neighbours; exact copies are one group each
  and count as one image in the near groups (the file listed), each member with its evidence against the group's
  first file (its representative).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from vitstudio.core.data.images import ImageReadError, copy_candidate_digests, read_image
from vitstudio.core.folder.fingerprints import Fingerprints, detail, fingerprints
from vitstudio.core.folder.keyedstore import RowView
from vitstudio.core.folder.pair_search import (
    CALIBRATION_SAMPLE,
    Pairs,
    concat_pairs,
    cosine_pairs,
    hamming_pairs,
    nearest_hamming,
    nearest_similarity,
    pairs_of,
    unit_rows,
)

# Of 64 bits. Measured on real photos (skimage.data photos, tiles and LFW faces, with planted copies): JPEG q60,
# resize to 80 % and mirrored (with the mirrored hash) differ by ≤ 6, +15 % brightness by ≤ 10, a 5 % border crop by
# 6-18; the closest genuinely different pair is at 10 (two 25-pixel faces), the ants/bees folder's at 14.
# 10 is imagededup's default too; a hash match still needs a second signal to agree.
HASH_DISTANCE = 10
CLOSER = 10.0  # a duplicate's distance (1 - similarity) is ≤ the folder's median nearest-neighbour distance / 10
MIN_CALIBRATION = 8  # fewer distinct images than this: fixed cuts instead of the folder's distribution
FIXED_PIXELS, FIXED_COSINE = 0.99, 0.99  # the fixed cuts (small folders)
# A mirrored match must also agree in fine detail (32×32 high-pass correlation): layouts that are mirror images of
# each other (the two lower corners of a round photo) match coarsely. Measured: mirrored copies ≥ 0.99, the closest
# mirrored distinct pair (two retina tiles, hash distance 4, thumbnails 0.995) 0.88.
MIRROR_DETAIL = 0.95
COSINE_THRESHOLD = 0.97  # the old fixed cosine: used to say how many images a fixed cut would have paired
SIGNALS = ("phash", "pixels", "embedding")


@dataclass(frozen=True)
class Member:
    """One image of a near group and its evidence against the group's representative (its first member)."""
    path: str
    hash_distance: int  # perceptual-hash bits that differ (0 for the representative)
    mirrored: bool  # the evidence compares it with the mirrored representative
    pixels: float  # correlation of the grey thumbnails
    cosine: float | None  # of the pooled features (None without a model)
    signals: tuple[str, ...]  # the signals that agree

    def to_dict(self) -> dict:
        return {"path": self.path, "hash_distance": self.hash_distance, "mirrored": self.mirrored,
                "pixels": round(self.pixels, 5), "cosine": None if self.cosine is None else round(self.cosine, 5),
                "signals": list(self.signals)}


@dataclass(frozen=True)
class DuplicateGroup:
    paths: tuple[str, ...]
    kinds: tuple[str, ...]  # ('exact',) or the near signals that linked its members
    similarity: float | None = None  # the lowest cosine of a member to the representative (None: not measured)
    leak: bool = False  # members (or their exact copies) on both sides of the split
    members: tuple[Member, ...] = ()  # near groups: each member's evidence
    copies: dict = field(default_factory=dict)  # near groups: {member: its exact copies}, counted as one image

    @property
    def exact(self) -> bool:
        return self.kinds == ("exact",)

    def to_dict(self) -> dict:
        out = {"paths": list(self.paths), "kinds": list(self.kinds), "similarity": self.similarity,
               "leak": self.leak}
        if self.members:
            out["members"] = [m.to_dict() for m in self.members]
        if self.copies:
            out["exact_copies"] = {k: list(v) for k, v in self.copies.items()}
        return out


@dataclass(frozen=True)
class Thresholds:
    """What decided the near groups, and why (the report prints `describe`)."""
    hash_distance: int  # the cut used: --hash-distance, or less where this folder's images are closer
    pixels: float  # thumbnail correlation cut
    pixels_why: str
    cosine: float | None  # feature cosine cut (None without a model)
    cosine_why: str
    packed: bool = False  # the model puts distinct images of this folder close together
    hash_why: str = ""

    def to_dict(self) -> dict:
        return {"hash_distance": self.hash_distance, "hash_why": self.hash_why,
                "pixels": round(self.pixels, 6), "pixels_why": self.pixels_why,
                "cosine": None if self.cosine is None else round(self.cosine, 6), "cosine_why": self.cosine_why,
                "model_packs_images": self.packed, "rule": "near-duplicates: at least two signals agree"}

    def describe(self) -> list[str]:
        lines = [f"  phash ≤ {self.hash_distance} of 64 bits, also against the mirrored image ({self.hash_why})",
                 f"  pixels: thumbnail correlation ≥ {self.pixels:.4f} ({self.pixels_why})"]
        if self.cosine is not None:
            lines.append(f"  embedding: feature cosine ≥ {self.cosine:.5f} ({self.cosine_why})")
        return lines


# -- exact copies ---------------------------------------------------------------------------------------------------
def exact_groups(paths: Sequence[str]) -> list[list[int]]:
    """Indices of files with identical bytes (full SHA-256), one list per group of two or more."""
    digests = copy_candidate_digests(paths)  # only files of a size another file shares are hashed
    by_digest: dict[str, list[int]] = {}
    for k, path in enumerate(paths):
        digest = digests.get(str(path))
        if digest is not None:
            by_digest.setdefault(digest, []).append(k)
    return [g for g in by_digest.values() if len(g) > 1]


def exact_pairs(paths: Sequence[str]) -> Pairs:
    """Every file paired with the first file of its exact group."""
    i, j = [], []
    for group in exact_groups(paths):
        i += [group[0]] * (len(group) - 1)
        j += group[1:]
    return pairs_of(i, j, np.ones(len(i)))


def perceptual_pairs(paths: Sequence[str], max_distance: int = HASH_DISTANCE) -> Pairs:
    """Pairs whose perceptual hashes (or one against the other's mirror) differ in ≤ max_distance bits, with the
    distance (unreadable files skipped)."""
    fp = fingerprints(paths)
    i, j, _ = hamming_pairs(fp.bits, fp.mirror_bits, max_distance)
    distance, _ = _hash_distance(fp, i, j)
    return pairs_of(fp.index[i], fp.index[j], distance)


def _hash_distance(fp: Fingerprints, i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distance, mirrored) of pairs: the smaller of direct and mirrored Hamming distances."""
    direct = (fp.bits[i] != fp.bits[j]).sum(1)
    mirrored = np.minimum((fp.bits[i] != fp.mirror_bits[j]).sum(1), (fp.mirror_bits[i] != fp.bits[j]).sum(1))
    return np.minimum(direct, mirrored), mirrored < direct


# -- calibration --------------------------------------------------------------------------------------------------
def calibrate(nearest: np.ndarray, what: str, fixed: float) -> tuple[float, str]:
    """The similarity cut of a signal from each image's nearest-neighbour similarity: a copy's distance
    (1 - similarity) is CLOSER× below the median one of this folder."""
    if len(nearest) < MIN_CALIBRATION:
        return fixed, f"fixed: fewer than {MIN_CALIBRATION} distinct images to calibrate on"
    median = float(np.median(nearest))
    cut = 1.0 - (1.0 - median) / CLOSER
    of = f"{len(nearest)} sampled" if len(nearest) >= CALIBRATION_SAMPLE else f"{len(nearest)}"
    return cut, (f"calibrated: the median nearest-neighbour {what} of this folder's {of} images (one per exact "
                 f"group) is {median:.4f}; a copy is ≥{CLOSER:g}× closer")


def hash_cut(hash_distance: int, nearest: np.ndarray) -> tuple[int, str]:
    """The hash cut: `hash_distance`, or half this folder's median nearest-neighbour distance where that is
    smaller (distinct handwritten digits sit 2-10 bits apart: there the hash alone tells little)."""
    if len(nearest) < MIN_CALIBRATION:
        return hash_distance, f"--hash-distance {hash_distance}"
    median = float(np.median(nearest))
    if median / 2 >= hash_distance:
        return hash_distance, (f"--hash-distance {hash_distance}; the median nearest-neighbour distance of this "
                               f"folder is {median:g}")
    cut = int(median // 2)
    return cut, (f"--hash-distance {hash_distance} lowered to {cut}, half the median nearest-neighbour distance of "
                 f"this folder's images, {median:g}")


# -- groups -------------------------------------------------------------------------------------------------------
def _cliques(n: int, i: np.ndarray, j: np.ndarray, strength: np.ndarray) -> list[list[int]]:
    """Disjoint cliques of the graph (greedy: the best-connected node first, its neighbours by strength, each
    kept only if it is linked to every member so far): no chaining, so no group larger than a neighbourhood."""
    adjacent: dict[int, dict[int, float]] = {}
    for a, b, s in zip(i.tolist(), j.tolist(), strength.tolist()):
        adjacent.setdefault(a, {})[b] = s
        adjacent.setdefault(b, {})[a] = s
    taken: set[int] = set()
    groups = []
    for node in sorted(adjacent, key=lambda k: (-len(adjacent[k]), k)):
        if node in taken:
            continue
        group = [node]
        for other in sorted(adjacent[node], key=lambda k: (-adjacent[node][k], k)):
            if other not in taken and all(other in adjacent[m] for m in group[1:]):
                group.append(other)
        if len(group) > 1:
            groups.append(group)
            taken.update(group)
    return groups


def _correlations(thumbs: RowView, mirrors: RowView, i: np.ndarray, j: np.ndarray, part: int = 16384
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(thumbnail i · thumbnail j, thumbnail i · mirrored thumbnail j) of each pair, a part of the pairs read at a
    time (a loose cut's 370k pairs would be 1.5 GB of thumbnails at once)."""
    direct, mirrored = np.zeros(len(i), np.float32), np.zeros(len(i), np.float32)
    for lo in range(0, len(i), part):
        a, b = thumbs[i[lo:lo + part]], j[lo:lo + part]
        direct[lo:lo + part] = (a * thumbs[b]).sum(1)
        mirrored[lo:lo + part] = (a * mirrors[b]).sum(1)
    return direct, mirrored


def _mirror_detail_agrees(paths: list[str], rows: np.ndarray, i: np.ndarray, j: np.ndarray, which: np.ndarray
                          ) -> np.ndarray:
    """For the pairs `which`: does the fine detail of one match the other's mirror (≥ MIRROR_DETAIL)?"""
    agrees = np.zeros(len(i), bool)
    for k in np.flatnonzero(which):
        try:
            a, b = (detail(read_image(paths[rows[x]])) for x in (i[k], j[k]))
        except ImageReadError:
            continue
        agrees[k] = float((a * b[:, ::-1]).sum()) >= MIRROR_DETAIL
    return agrees


def _leak(paths: Sequence[str], val: set[str] | None) -> bool:
    return val is not None and any(p in val for p in paths) and any(p not in val for p in paths)


def find_groups(paths: Sequence[str], fp: Fingerprints | None = None, features: np.ndarray | None = None,
                feature_index: np.ndarray | None = None, hash_distance: int = HASH_DISTANCE,
                threshold: float | None = None, val: set[str] | None = None, fixed_cuts: bool = False
                ) -> tuple[list[DuplicateGroup], Thresholds, list[str]]:
    """Exact groups and near groups (cliques on which ≥ 2 signals agree) of `paths`, the thresholds used, notes.
    `features` (rows of `feature_index` into `paths`) are the model's pooled features; `threshold` fixes their
    cosine cut instead of calibrating it. `fixed_cuts`: the hash and thumbnail cuts a small folder gets, not the
    folder's own distribution (in a folder of recordings nearly every image has a near-copy: a copy is the rule
    there, not the outlier the calibration looks for)."""
    paths = [str(p) for p in paths]
    fp = fingerprints(paths) if fp is None else fp
    exact = exact_groups(paths)
    copies = {g[0]: g[1:] for g in exact}
    duplicate = {k for g in exact for k in g[1:]}
    keep = np.asarray([k not in duplicate for k in fp.index.tolist()], bool)
    rows = fp.index[keep]  # one image per exact group, (n,) into paths
    bits, mbits = (a if keep.all() else a[keep] for a in (fp.bits, fp.mirror_bits))
    # the thumbnails (2 KB an image) as views, read where the calibration and the pairs ask
    thumbs, mthumbs = ((a if isinstance(a, RowView) else RowView(a)).take(keep) for a in (fp.thumbs, fp.mirror_thumbs))
    if fixed_cuts:
        hash_why, pixels_cut, pixels_why = f"--hash-distance {hash_distance}", FIXED_PIXELS, "fixed"
    else:
        hash_distance, hash_why = hash_cut(hash_distance, nearest_hamming(bits, mbits))
        pixels_cut, pixels_why = calibrate(nearest_similarity(thumbs, mthumbs), "thumbnail correlation",
                                           FIXED_PIXELS)
    # candidates: the pairs the hash or the features find. A near pair needs two of the three signals, so one of
    # these two always finds it: no search of the thumbnails (of 256 floats, the dearest) is needed
    parts = [hamming_pairs(bits, mbits, hash_distance)]
    f, cosine_cut, cosine_why, notes, packed = None, None, "", [], False
    if features is not None:
        f, cosine_cut, cosine_why, notes, packed = _feature_signal(rows, features, feature_index, threshold)
        parts.append(cosine_pairs(f, cosine_cut))
    i, j, _ = concat_pairs(parts)
    key = np.unique(i * max(1, len(rows)) + j)
    i, j = key // max(1, len(rows)), key % max(1, len(rows))
    distance, mirrored = _hash_distance(Fingerprints(rows, bits, mbits, thumbs, mthumbs), i, j)
    direct, against_mirror = _correlations(thumbs, mthumbs, i, j)
    pixels = np.maximum(direct, against_mirror)
    cosine = (f[i] * f[j]).sum(1).numpy() if f is not None else np.full(len(i), np.nan)
    votes = np.stack([distance <= hash_distance, pixels >= pixels_cut, cosine >= (cosine_cut or 2.0)])
    ok = votes.sum(0) >= 2
    flipped = mirrored | (against_mirror > direct)
    ok &= ~flipped | _mirror_detail_agrees(paths, rows, i, j, ok & flipped)
    strength = votes.sum(0) * 100.0 - distance + pixels
    evidence = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(i.tolist(), j.tolist())) if ok[k]}
    groups = []
    for g in exact:
        group = tuple(paths[k] for k in g)
        groups.append(DuplicateGroup(group, ("exact",), 1.0 if f is not None else None, _leak(group, val)))
    pairs = _PairEvidence(evidence, votes, distance, mirrored, pixels, cosine if f is not None else None)
    for clique in _cliques(len(rows), i[ok], j[ok], strength[ok]):
        groups.append(_near_group(clique, paths, rows, copies, pairs, val))
    thresholds = Thresholds(hash_distance, pixels_cut, pixels_why, cosine_cut, cosine_why, packed, hash_why)
    return sorted(groups, key=lambda g: (not g.leak, not g.exact, g.paths)), thresholds, notes


def _feature_signal(rows: np.ndarray, features: np.ndarray, feature_index: np.ndarray, threshold: float | None):
    """The model's features as a signal: (unit features per row of `rows`, cosine cut, why that cut, notes, whether
    the model packs distinct images close)."""
    where = {int(k): r for r, k in enumerate(np.asarray(feature_index).tolist())}
    f = torch.zeros(len(rows), features.shape[1])
    have = [r for r, k in enumerate(rows.tolist()) if k in where]
    f[have] = unit_rows(np.asarray(features)[[where[rows[r]] for r in have]])
    nearest = nearest_similarity(f[have]) if len(have) > 1 else np.zeros(0, np.float32)
    if threshold is None:
        cosine_cut, cosine_why = calibrate(nearest, "feature cosine", FIXED_COSINE)
    else:
        cosine_cut, cosine_why = float(threshold), "given (--threshold)"
    crowded = int((nearest >= COSINE_THRESHOLD).sum())
    packed = crowded > 0.05 * max(1, len(nearest))
    notes = []
    if packed:
        notes.append(f"This model puts distinct images of this folder close: {crowded} of {len(nearest)} have "
                     f"a neighbour at feature cosine ≥ {COSINE_THRESHOLD} (median nearest neighbour "
                     f"{float(np.median(nearest)):.4f}). A fixed cosine cut would group them; here features "
                     f"count only where a hash or the pixels agree, at cosine ≥ {cosine_cut:.5f}.")
    return f, cosine_cut, cosine_why, notes, packed


@dataclass(frozen=True)
class _PairEvidence:
    """The candidate pairs' signals: `evidence` maps a kept pair (a < b, rows) to its column in the arrays."""

    evidence: dict
    votes: np.ndarray  # (signals, pairs) bool
    distance: np.ndarray
    mirrored: np.ndarray
    pixels: np.ndarray
    cosine: np.ndarray | None  # None without features


def _near_group(clique: list[int], paths: list[str], rows: np.ndarray, copies: dict, pairs: _PairEvidence,
                val: set[str] | None) -> DuplicateGroup:
    """A near group from a clique (its first row the representative), with each member's evidence against it."""
    with_features = pairs.cosine is not None
    rep, members, kinds, lowest = clique[0], [], set(), None
    members.append(Member(paths[rows[rep]], 0, False, 1.0, 1.0 if with_features else None, ()))
    for other in clique[1:]:
        k = pairs.evidence[(min(rep, other), max(rep, other))]
        signals = tuple(s for s, v in zip(SIGNALS, pairs.votes[:, k]) if v)
        kinds.update(signals)
        cos = float(pairs.cosine[k]) if with_features else None
        lowest = cos if lowest is None or (cos is not None and cos < lowest) else lowest
        members.append(Member(paths[rows[other]], int(pairs.distance[k]), bool(pairs.mirrored[k]),
                              float(pairs.pixels[k]), cos, signals))
    group = tuple(m.path for m in members)
    extra = {paths[rows[c]]: tuple(paths[x] for x in copies[rows[c]]) for c in clique if rows[c] in copies}
    everyone = group + tuple(p for v in extra.values() for p in v)
    return DuplicateGroup(group, tuple(s for s in SIGNALS if s in kinds), lowest, _leak(everyone, val),
                          tuple(members), extra)
