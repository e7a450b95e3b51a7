"""A dataset health check (`vitstudio audit DATA --model M`, the Training panel's scan): exact and near-duplicate
groups, the groups that leak across train/val, and the images whose given label the model doubts most.

Leaks are judged against the dataset's own val/ folder when it has one, else against the plain file-level split
(what a split that ignores duplicates would do). ViT Studio's own training split keeps every exact-duplicate
group on one side (`datasets.split_dataset(groups=...)`), so its validation is not inflated by them.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vitstudio.core.data.datasets import scan_dataset, split_dataset
from vitstudio.core.folder.duplicates import (
    COSINE_THRESHOLD,
    DuplicateGroup,
    cosine_pairs,
    exact_pairs,
    group_pairs,
    perceptual_pairs,
)
from vitstudio.core.folder.embedcache import embed_folder
from vitstudio.core.folder.label_review import LabelIssue, review_labels
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel


@dataclass(frozen=True)
class AuditReport:
    root: str
    images: int
    classes: tuple[str, ...]
    split: str  # what leaks were judged against
    groups: tuple[DuplicateGroup, ...]
    label_issues: tuple[LabelIssue, ...] = ()  # every image, most doubtful first (empty without a model)
    errors: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def leaks(self) -> tuple[DuplicateGroup, ...]:
        return tuple(g for g in self.groups if g.leak)

    def to_json(self, top: int = 50) -> str:
        return json.dumps({
            "root": self.root, "images": self.images, "classes": list(self.classes), "split": self.split,
            "exact_groups": [g.to_dict() for g in self.groups if "exact" in g.kinds],
            "near_groups": [g.to_dict() for g in self.groups if "exact" not in g.kinds],
            "leaks": [g.to_dict() for g in self.leaks],
            "label_issues": [i.to_dict() for i in self.label_issues[:top]],
            "errors": [list(e) for e in self.errors], "notes": list(self.notes)}, indent=1)

    def describe(self, top: int = 10) -> str:
        exact = sum("exact" in g.kinds for g in self.groups)
        lines = [f"{self.images} images in {len(self.classes)} classes ({self.root}).",
                 f"Duplicate groups: {exact} exact, {len(self.groups) - exact} near; "
                 f"{len(self.leaks)} straddle train/val ({self.split})."]
        for g in self.leaks[:top]:
            lines.append(f"  leak ({', '.join(g.kinds)}): " + "  |  ".join(g.paths))
        if self.label_issues:
            lines.append(f"Most doubtful labels (of {len(self.label_issues)}):")
            for i in self.label_issues[:top]:
                lines.append(f"  {i.quality:.3f}  {i.path}: given {i.given}, looks like {i.suggested} "
                             f"(p(given) {i.p_given:.2f})")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)


def audit(data: str | Path, loaded: LoadedModel | None = None, threshold: float = COSINE_THRESHOLD,
          batch_size: int = 32, cancel: CancelToken | None = None) -> Generator[Progress, None, AuditReport]:
    """Scan `data` (a folder of class folders), hash, embed (with a model), group and review. Reads only."""
    scan = scan_dataset(data)
    labelled = [(str(p), c) for c in scan.classes for p in scan.train[c]]
    labelled += [(str(p), c) for c in scan.classes for p in (scan.val or {}).get(c, ())]
    paths = [p for p, _ in labelled]
    if scan.val is not None:
        val = {str(p) for files in scan.val.values() for p in files}
        split = "the dataset's val/ folder"
    else:
        plain = split_dataset(scan) if not scan.too_small else None
        val = {str(p) for p, _ in plain.val} if plain else set()
        split = "a file-level 80/20 split"
    yield Progress(0, len(paths), "Hashing files")
    evidence = {"exact": exact_pairs(paths)}
    yield Progress(0, len(paths), "Perceptual hashes")
    evidence["phash"] = perceptual_pairs(paths)
    issues: tuple[LabelIssue, ...] = ()
    errors: list[tuple[str, str]] = list(scan.skipped)
    notes = []
    if loaded is not None:
        embedded = yield from embed_folder(loaded, paths, batch_size, cancel)
        errors += list(embedded.errors)
        index = {p: i for i, p in enumerate(paths)}
        features = embedded.features_of()
        rows = np.asarray([index[p] for p in embedded.paths])
        i, j, sim = cosine_pairs(features, threshold)
        evidence["embedding"] = (rows[i], rows[j], sim)
        if len(i) > len(paths):
            notes.append(f"{len(i)} image pairs are above cosine {threshold} in this model's "
                         f"features: it puts distinct images this close, so raise the near-duplicate threshold "
                         f"(--threshold; or use a self-supervised model such as DINOv2).")
        classes = list(scan.classes)
        given = dict(labelled)
        labels = np.asarray([classes.index(given[p]) for p in embedded.paths])
        try:
            issues = tuple(review_labels(list(embedded.paths), features, labels, classes))
        except ValueError as exc:
            notes.append(str(exc))
    else:
        notes.append("Without a model only exact copies and perceptual-hash matches are found, and labels are "
                      "not reviewed (give --model).")
    groups = group_pairs(paths, evidence, val)
    return AuditReport(str(scan.root), len(paths), tuple(scan.classes), split, tuple(groups), issues,
                       tuple(errors), tuple(notes))
