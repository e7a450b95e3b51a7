"""Folder datasets: scan and validate a class-per-subfolder tree, split it deterministically, keep a manifest.

The dataset folder is only ever read: nothing here writes under its root.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from vitstudio.core.data.dataset_scan import DatasetError, DatasetScan  # noqa: F401  (imported from here too)
from vitstudio.core.data.headers import HeaderCache
from vitstudio.core.data.images import (
    IMAGE_SUFFIXES,
    ImageReadError,
    check_file,
    copy_candidate_digests,
    expand_paths,
    links_to_ancestor,
)
from vitstudio.core.data.labels_file import scan_labels_file

VAL_NAMES = ("val", "validation")


def _class_dirs(folder: Path, skipped: list) -> list[Path]:
    """The class folders of `folder`; anything else there (an image outside any class folder, a dangling link, a
    FIFO) is listed in `skipped` with its reason. Hidden entries are left alone."""
    dirs = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir() and not (entry.is_symlink() and links_to_ancestor(str(entry))):
            dirs.append(entry)
            continue
        try:
            check_file(entry)
            skipped.append((str(entry), "not inside a class folder (put each image in its class's folder)"))
        except ImageReadError as exc:
            skipped.append((str(entry), exc.reason))
    return dirs


def _scan_classes(folder: Path, skipped: list, sizes: list, headers: HeaderCache) -> dict[str, tuple[Path, ...]]:
    """class -> its usable image files (sorted): what `read_image` checks before decoding holds (a regular file,
    links only to one, a supported format, a header within the pixel limit). Every other path met is listed in
    `skipped` with its reason, whichever data path the run then takes."""
    out = {}
    for class_dir in _class_dirs(folder, skipped):
        files, ignored = [], []
        for f in expand_paths([class_dir], ignored=ignored):
            if f.name.startswith("."):
                continue
            try:
                sizes.append(headers.size(f))  # the header only (remembered): catches non-images, bombs, links, FIFOs
                files.append(f)
            except ImageReadError as exc:
                skipped.append((str(f), exc.reason))
        skipped += [(p, why) for p, why in ignored if not Path(p).name.startswith(".")]
        out[class_dir.name] = tuple(sorted(files))
    return out


def _nested_layout(root: Path) -> str | None:
    """A message when `root`'s folders hold class folders rather than images (DATA/setA/cat, DATA/setB/cat…),
    which would otherwise train on the set names as classes; None for the usual layouts."""
    tops = [d for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    if not tops:
        return None
    inner = {}
    for top in tops:
        entries = [e for e in top.iterdir() if not e.name.startswith(".")]
        if any(e.suffix.lower() in IMAGE_SUFFIXES and not e.is_dir() for e in entries):
            return None  # images directly in it: a class folder
        subs = {e.name for e in entries if e.is_dir()}
        if len(subs) < 2:
            return None
        inner[top.name] = subs
    shared = sorted(set.intersection(*inner.values()))
    if len(tops) > 1 and len(shared) < 2:
        return None  # class folders with unrelated subfolders (dog/puppies, cat/kittens): images are searched
    sets = ", ".join(d.name for d in tops[:4]) + ("…" if len(tops) > 4 else "")
    classes = ", ".join((shared or sorted(inner[tops[0].name]))[:6])
    return (f"{root} has a nested layout: its folder(s) {sets} each hold class folders ({classes}) instead of "
            f"images, so their own names would be trained on as the classes. Use one level of class folders: "
            f"point at one set (e.g. {tops[0]}), merge the sets into {root.name}/<class>/, or name them train/ "
            f"and val/ (each holding the class folders).")


def scan_dataset(root: str | Path) -> DatasetScan:
    """Scan `root` (class subfolders, or train/ + val/ each holding class subfolders; or a labels file, CSV of
    path,label rows) and validate it."""
    root = Path(root)
    if root.suffix.lower() == ".csv" and root.is_file():
        return scan_labels_file(root)
    if not root.is_dir():
        raise DatasetError(f"{root} is not a folder.")
    if (root / "settings.json").is_file() and (root / "images").is_dir():  # a Teach project (core/teach/project.py)
        return scan_dataset(root / "images")
    skipped: list[tuple[str, str]] = []
    sizes: list[tuple[int, int]] = []
    headers = HeaderCache(root)
    val_dir = next((root / n for n in VAL_NAMES if (root / n).is_dir()), None)
    if (root / "train").is_dir() and val_dir is not None:
        train = _scan_classes(root / "train", skipped, sizes, headers)
        val = _scan_classes(val_dir, skipped, sizes, headers)
    else:
        nested = _nested_layout(root)
        if nested:
            raise DatasetError(nested)
        train, val = _scan_classes(root, skipped, sizes, headers), None
    headers.save()
    extra = sorted(set(val or {}) - set(train))
    if extra:
        raise DatasetError(f"{val_dir.name}/ has classes that train/ lacks: {', '.join(extra)}.")
    classes = tuple(sorted(train))
    if not classes:
        raise DatasetError(f"{root} has no class subfolders (expected one folder of images per class).")
    if len(classes) < 2:
        raise DatasetError(f"{root} has only one class ({classes[0]}); a classifier needs at least two.")
    empty = [c for c in classes if not train[c] and not (val or {}).get(c)]
    if empty:
        raise DatasetError(f"No readable image in class folder(s): {', '.join(empty)}.")
    counts = Counter({c: len(train[c]) for c in classes})
    too_small = tuple(c for c in classes if val is None and counts[c] < 2)
    lo = (min(w for w, _ in sizes), min(h for _, h in sizes))
    hi = (max(w for w, _ in sizes), max(h for _, h in sizes))
    return DatasetScan(root, classes, train, val, tuple(skipped), (lo, hi), too_small)


@dataclass(frozen=True)
class Split:
    """Which file goes where, with labels as class indices; serialisable as a manifest."""

    root: Path
    classes: tuple[str, ...]
    train: tuple[tuple[Path, int], ...]
    val: tuple[tuple[Path, int], ...]
    val_ratio: float | None  # None when the dataset came with its own val/
    seed: int
    meta: dict = field(default_factory=dict)

    def to_manifest(self) -> dict:
        def rel(items):  # a labels file may list absolute paths outside its folder: they stay absolute
            return [[p.relative_to(self.root).as_posix() if p.is_relative_to(self.root) else str(p), label]
                    for p, label in items]

        return {"root": str(self.root), "classes": list(self.classes), "val_ratio": self.val_ratio,
                "seed": self.seed, "train": rel(self.train), "val": rel(self.val)}

    @classmethod
    def from_manifest(cls, manifest: dict, root: str | Path | None = None) -> Split:
        """Rebuild a split on any machine: paths are relative to the dataset root (override it with `root`)."""
        base = Path(root or manifest["root"])
        if base.suffix.lower() == ".csv" and base.is_file():  # a labels file's paths are relative to its folder
            base = base.absolute().parent

        def items(rows):
            return tuple((base / rel, int(label)) for rel, label in rows)

        return cls(base, tuple(manifest["classes"]), items(manifest["train"]), items(manifest["val"]),
                   manifest["val_ratio"], int(manifest["seed"]))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_manifest(), indent=1))


def split_dataset(scan: DatasetScan, val_ratio: float = 0.2, seed: int = 0,
                  groups: dict[Path, str] | None = None) -> Split:
    """Stratified, seeded split of each class's sorted file list (or the dataset's own val/).

    With `groups` (file -> group id, e.g. the content hash: `exact_duplicate_groups`), the files of one group
    always land on the same side, even across classes, so a copy in train can never inflate validation. When
    that is impossible (a class made only of copies) the plain split is returned, marked `meta["groups"]`."""
    index = {c: i for i, c in enumerate(scan.classes)}
    if scan.val is not None:
        train = tuple((p, index[c]) for c in scan.classes for p in scan.train[c])
        val = tuple((p, index[c]) for c in scan.classes for p in scan.val.get(c, ()))
        return Split(scan.root, scan.classes, train, val, None, seed)
    if not 0.0 < val_ratio < 1.0:
        raise DatasetError("The validation ratio must be between 0 and 1.")
    if scan.too_small:
        raise DatasetError(f"Class(es) with fewer than 2 images cannot be split: {', '.join(scan.too_small)}.")
    plain = _split_files(scan, val_ratio, seed, index, None)
    if not groups:
        return plain
    grouped = _split_files(scan, val_ratio, seed, index, groups)
    trained = {label for _, label in grouped.train}
    if grouped.val and len(trained) == len(scan.classes):
        return grouped
    # copies everywhere (every image of a class has a copy elsewhere): no leak-free split exists
    return Split(plain.root, plain.classes, plain.train, plain.val, val_ratio, seed, {"groups": "ignored"})


def _split_files(scan: DatasetScan, val_ratio: float, seed: int, index: dict[str, int],
                 groups: dict[Path, str] | None) -> Split:
    train, val = [], []
    side: dict[str, bool] = {}  # group -> goes to val
    sizes: dict[tuple[str, str], int] = {}  # (group, class) -> files of the group in the class
    for c in scan.classes:
        for p in scan.train[c]:
            key = (groups.get(p, str(p)) if groups else str(p), c)
            sizes[key] = sizes.get(key, 0) + 1
    for c in scan.classes:
        files = list(scan.train[c])  # already sorted
        # seeded by the name's bytes: a str seed hashes its UTF-8, the same on every machine, and a folder name
        # that is not UTF-8 (held as surrogate escapes) seeds by its own bytes instead of failing to encode
        random.Random(f"{seed}:{c}".encode("utf-8", "surrogateescape")).shuffle(files)
        n_val = min(len(files) - 1, max(1, round(len(files) * val_ratio)))
        if groups is None:
            chosen = set(files[:n_val])
        else:
            chosen, count = set(), 0
            for p in files:
                group = groups.get(p, str(p))
                if group not in side:  # a group goes to val whole, and only while it fits there
                    side[group] = count + sizes[(group, c)] <= n_val
                if side[group]:
                    chosen.add(p)
                    count += 1
        val += [(p, index[c]) for p in sorted(chosen)]
        train += [(p, index[c]) for p in sorted(set(files) - chosen)]
    return Split(scan.root, scan.classes, tuple(train), tuple(val), val_ratio, seed)


def without(scan: DatasetScan, exclude) -> DatasetScan:
    """The scan minus the files in `exclude` (paths as given by a label review): an exclusion list lives in the
    run's config, never as a change to the dataset."""
    if not exclude:
        return scan
    gone = {str(Path(p).resolve()) for p in exclude}

    def keep(files):
        return tuple(p for p in files if str(Path(p).resolve()) not in gone)

    train = {c: keep(files) for c, files in scan.train.items()}
    val = {c: keep(files) for c, files in scan.val.items()} if scan.val is not None else None
    too_small = tuple(c for c in scan.classes if len(train[c]) < 2) if val is None else scan.too_small
    return dataclasses.replace(scan, train=train, val=val, too_small=too_small)


def exact_duplicate_groups(scan: DatasetScan) -> dict[Path, str]:
    """file -> SHA-256 of its bytes, for the files that have an exact copy elsewhere in the dataset."""
    files = [p for c in scan.classes for p in scan.train[c]]
    digests = copy_candidate_digests(files)  # only files of a size another file shares are hashed
    copies = Counter(digests.values())
    return {p: digests[str(p)] for p in files if copies[digests.get(str(p))] > 1}


UPSTREAM_SUFFIXES = (".jpg", ".JPG", ".png", ".PNG")  # upstream read_split_data's `supported`


def upstream_split(scan: DatasetScan, val_ratio: float = 0.2) -> Split:
    """The seed recipe's `read_split_data`: classes sorted, each class's files with one of four suffixes
    (directly in its folder) sorted by path, `random.sample(files, k=int(n * val_ratio))` from one RNG seeded 0
    across the classes in order. Files the scan found unreadable are dropped after sampling, so the sample is
    upstream's own."""
    import os

    if scan.val is not None:
        return split_dataset(scan)
    if scan.labels_file is not None:
        raise DatasetError("The upstream split rule reads class folders; a labels file is split with the "
                           "stratified rule.")
    rng = random.Random(0)  # upstream: random.seed(0), then the module-level random.sample
    readable = {str(p) for files in scan.train.values() for p in files}
    index = {c: i for i, c in enumerate(scan.classes)}
    train, val = [], []
    for c in scan.classes:
        folder = os.path.join(str(scan.root), c)
        files = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                       if os.path.splitext(f)[-1] in UPSTREAM_SUFFIXES)
        chosen = set(rng.sample(files, k=int(len(files) * val_ratio)))
        for f in files:
            if f in readable:
                (val if f in chosen else train).append((Path(f), index[c]))
    if not val:
        raise DatasetError("The upstream split rule put no image in the validation set (int(n × ratio) is 0 for "
                           "every class); use the stratified rule or more images.")
    return Split(scan.root, scan.classes, tuple(train), tuple(val), val_ratio, 0, {"rule": "upstream"})
