"""A dataset health check (`vitstudio audit DATA --model M`, the Training panel's scan): exact and near-duplicate
groups, the groups that leak across train/val, and the images whose given label the model doubts most.

Leaks are judged against the dataset's own val/ folder when it has one. A folder without one has no split to leak
across: the check then makes one up, the plain file-level 80/20 split (what a split that ignores duplicates would
do), and the report says so (its groups "would leak"). ViT Studio's own training split keeps every exact-duplicate
group on one side (`datasets.split_dataset(groups=...)`), so its validation is not inflated by them.

The report states what decided it (model, hash distance, calibrated cuts and why) and is strict JSON (`null`, never
NaN); files that could not be read are listed (the CLI then exits 1), files that are not images are only counted.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from vitstudio.core.data.datasets import scan_dataset, split_dataset
from vitstudio.core.files import counted, shown_path
from vitstudio.core.folder.duplicates import HASH_DISTANCE, DuplicateGroup, Thresholds, find_groups
from vitstudio.core.folder.embedcache import embed_folder
from vitstudio.core.folder.fingerprintcache import FingerprintRider, cached_fingerprints
from vitstudio.core.folder.label_review import LabelIssue, estimated_wrong, probe_accuracy, review_labels
from vitstudio.core.folder.model_fit import fit_of
from vitstudio.core.folder.resultcache import load_result, result_key, save_result
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel


def strict(value):
    """`value` with every non-finite float replaced by None (JSON's null), recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (np.floating, np.integer)):
        return strict(value.item())
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


VAL_FOLDER = "the dataset's val/ folder"
MADE_UP = ("no val/ folder, so a split made up for this check: the files split 80/20 at random, as a split that "
           "ignores duplicates would; ViT Studio's own training keeps exact copies on one side")


def _group_line(g: DuplicateGroup, made_up: bool) -> str:
    leak = ("WOULD LEAK " if made_up else "LEAK ") if g.leak else ""
    head = leak + (f"exact ({len(g.paths)}, identical bytes): " if g.exact else
                   f"near ({len(g.paths)}, {' + '.join(g.kinds)}): ")
    if g.exact or not g.members:
        return "  " + head + "  |  ".join(shown_path(p) for p in g.paths)
    parts = [shown_path(g.members[0].path)]
    for m in g.members[1:]:
        cos = "" if m.cosine is None else f", cosine {m.cosine:.5f}"
        parts.append(f"{shown_path(m.path)} (hash {m.hash_distance}{' mirrored' if m.mirrored else ''}, "
                     f"pixels {m.pixels:.4f}{cos})")
    copies = sum(len(v) for v in g.copies.values())
    return "  " + head + "  |  ".join(parts) + (f"  (+{copies} exact copies)" if copies else "")


@dataclass(frozen=True)
class AuditReport:
    root: str
    images: int
    classes: tuple[str, ...]
    split: str  # what leaks were judged against
    groups: tuple[DuplicateGroup, ...]
    label_issues: tuple[LabelIssue, ...] = ()  # every image, most doubtful first (empty without a model)
    errors: tuple[tuple[str, str], ...] = ()  # files that could not be read
    notes: tuple[str, ...] = field(default_factory=tuple)
    model: str | None = None
    thresholds: Thresholds | None = None
    ignored: tuple[tuple[str, str], ...] = ()  # files that are not images (or outside the class folders)
    fit: dict | None = None  # model_fit.FolderFit.to_dict(): whether the model fits the folder (with a model)

    @property
    def leaks(self) -> tuple[DuplicateGroup, ...]:
        return tuple(g for g in self.groups if g.leak)

    @property
    def made_up_split(self) -> bool:
        """The folder has no val/: leaks are judged against a split the check made up, not one that exists."""
        return self.split != VAL_FOLDER

    def to_dict(self, top: int | None = None) -> dict:
        return strict({
            "root": self.root, "images": self.images, "classes": list(self.classes), "model": self.model,
            "split": self.split, "split_made_up": self.made_up_split,
            "thresholds": self.thresholds.to_dict() if self.thresholds else None,
            "exact_groups": [g.to_dict() for g in self.groups if g.exact],
            "near_groups": [g.to_dict() for g in self.groups if not g.exact],
            "leaks": [g.to_dict() for g in self.leaks],
            "label_issues": [i.to_dict() for i in self.label_issues[:top]],
            "label_issues_total": len(self.label_issues),
            "label_issues_estimated_wrong": estimated_wrong(self.label_issues),
            "label_probe": probe.to_dict() if (probe := probe_accuracy(self.label_issues)) else None,
            "errors": [list(e) for e in self.errors], "ignored": [list(e) for e in self.ignored],
            "notes": list(self.notes), "model_fit": self.fit})

    def to_json(self, top: int | None = None) -> str:
        """Strict JSON (allow_nan=False: a NaN left anywhere raises instead of writing invalid JSON)."""
        return json.dumps(self.to_dict(top), indent=1, allow_nan=False)

    def describe(self, top: int = 10) -> str:
        exact = sum(g.exact for g in self.groups)
        lines = [f"{counted(self.images, 'image')} in {counted(len(self.classes), 'class', 'classes')} "
                 f"({shown_path(self.root)}); "
                 f"model: {self.model or 'none'}."]
        if self.thresholds is not None:
            lines.append("Duplicates: exact = identical bytes (SHA-256); near = at least two of these agree:")
            lines += self.thresholds.describe()
        straddle = "would straddle train/val" if self.made_up_split else "straddle train/val"
        lines.append(f"Duplicate groups: {exact} exact, {len(self.groups) - exact} near; "
                     f"{len(self.leaks)} {straddle} ({self.split}).")
        lines += [_group_line(g, self.made_up_split) for g in self.groups[:top]]
        if len(self.groups) > top:
            lines.append(f"  … {len(self.groups) - top} more groups, see --json")
        if self.label_issues:
            probe = probe_accuracy(self.label_issues)
            lines.append(f"Labels: cleanlab estimates {estimated_wrong(self.label_issues)} of "
                         f"{len(self.label_issues)} are wrong (flagged *, the most doubtful first); the probe's "
                         f"{probe.describe()}.")
            if probe.weak:
                lines.append(f"  The count means little: {probe.caveat()}.")
            lines.append("Most doubtful labels (quality: cleanlab's label-quality score, low = doubtful):")
            for i in self.label_issues[:top]:
                lines.append(f"{'*' if i.flagged else ' '} {i.quality:.4g}  {shown_path(i.path)}: given "
                             f"{shown_path(i.given)}, looks like {shown_path(i.suggested)} (p(given) {i.p_given:.4g})")
            if len(self.label_issues) > top:
                lines.append(f"  … {len(self.label_issues) - top} more, see --json")
        if self.errors:
            lines.append(f"Unreadable files ({len(self.errors)}):")
            lines += [f"  {shown_path(path)}: {reason}" for path, reason in self.errors]
        if self.ignored:
            lines.append(f"{len(self.ignored)} other files are not images or not in a class folder (see --json).")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)


def audit(data: str | Path, loaded: LoadedModel | None = None, threshold: float | None = None,
          batch_size: int | None = 32, cancel: CancelToken | None = None, hash_distance: int = HASH_DISTANCE,
          given_apart: dict[str, str] | None = None) -> Generator[Progress, None, AuditReport]:
    """Scan `data` (a folder of class folders), hash, embed (with a model), group and review. Reads only.
    `threshold` fixes the feature cosine cut (None: calibrated on this folder). `given_apart`: labels given apart
    from the folders (the GUI's Labels tab, path → class); the review reads them instead of the folder a file is in,
    as the table's "given" column shows them (a class only they name joins the classes).

    With a model, the report is kept (`resultcache.py`) under the files' contents, the model, the labels and the
    settings: an audit of an unchanged folder reads it back after the cached embedding pass."""
    scan = scan_dataset(data)
    labelled = [(str(p), c) for c in scan.classes for p in scan.train[c]]
    labelled += [(str(p), c) for c in scan.classes for p in (scan.val or {}).get(c, ())]
    paths = [p for p, _ in labelled]
    embedded = key = None
    if loaded is not None:
        rider = FingerprintRider()  # the fingerprints from the embedding pass's decode: each image decoded once
        try:
            embedded = yield from embed_folder(loaded, paths, batch_size, cancel, alongside=rider)
        finally:
            rider.close()
        key = result_key("audit", embedded.tower, embedded.content, sorted(embedded.errors), labelled,
                         sorted(scan.failed), sorted(scan.ignored), str(scan.root), scan.val is not None, threshold,
                         hash_distance, sorted((given_apart or {}).items()), getattr(loaded, "name", None),
                         "made-up split named")  # the words of its split are part of what a kept report holds
        report = load_result("audit", key)
        if isinstance(report, AuditReport):
            return _with_fit(report, loaded, embedded, labelled)
    report = yield from _audited(scan, labelled, loaded, embedded, threshold, hash_distance, given_apart)
    if key is not None:
        save_result("audit", key, report)
    return _with_fit(report, loaded, embedded, labelled)


def _with_fit(report: AuditReport, loaded, embedded, labelled) -> AuditReport:
    """The report with whether the model fits the folder (its flags from the features embedded: no forward, a
    neighbour search against the model's bank), made on every audit, cached report or not."""
    if embedded is None:
        return report
    fit = fit_of(loaded, embedded, given=dict(labelled))
    return replace(report, fit=fit.to_dict()) if fit is not None else report


def _audited(scan, labelled, loaded, embedded, threshold, hash_distance, given_apart
             ) -> Generator[Progress, None, AuditReport]:
    paths = [p for p, _ in labelled]
    if scan.val is not None:
        val = {str(p) for files in scan.val.values() for p in files}
        split = VAL_FOLDER
    else:
        plain = split_dataset(scan) if not scan.too_small else None
        val = {str(p) for p, _ in plain.val} if plain else set()
        split = MADE_UP
    yield Progress(0, len(paths), "Fingerprints (hashes and thumbnails)")
    fp = cached_fingerprints(paths)  # cached by content: a second audit hashes nothing it has seen
    errors = dict(scan.failed)  # a labels file's rows that are no readable image included, wherever they point
    errors.update(dict(fp.errors))
    notes: list[str] = []
    features = feature_index = review = None
    with ThreadPoolExecutor(1, thread_name_prefix="vitstudio-review") as pool:
        if embedded is not None:
            errors.update(dict(embedded.errors))
            index = {p: i for i, p in enumerate(paths)}
            features = embedded.features_of()
            feature_index = np.asarray([index[p] for p in embedded.paths], np.int64)
            # the label review (one thread: see label_review) beside the duplicate search (faiss's threads):
            # at 100k images each takes ~25 s, and neither needs the other
            review = pool.submit(_reviewed, scan, labelled, embedded, features, given_apart, notes)
        else:
            notes.append("Without a model only exact copies and model-free matches (perceptual hash and thumbnail "
                         "agreeing) are found, and labels are not reviewed (give --model).")
        yield Progress(0, len(paths), "Grouping duplicates")
        groups, thresholds, found_notes = find_groups(paths, fp, features, feature_index, hash_distance, threshold,
                                                      val)
        issues: tuple[LabelIssue, ...] = review.result() if review is not None else ()
    notes += found_notes  # after the review's own notes (its thread has ended): the same order every run
    model = getattr(loaded, "name", None) if loaded is not None else None
    return AuditReport(str(scan.root), len(paths), tuple(scan.classes), split, tuple(groups), issues,
                       tuple(sorted(errors.items())), tuple(notes), model, thresholds, scan.ignored)


def _reviewed(scan, labelled, embedded, features, given_apart, notes: list[str]) -> tuple[LabelIssue, ...]:
    """The label review of the embedded files, with the labels given apart from the folders read instead."""
    classes = list(scan.classes)
    given = dict(labelled)
    scanned = {os.path.abspath(p): p for p in given}  # a relative DATA_DIR against a file's absolute paths
    apart = {scanned[a]: c for a, c in ((os.path.abspath(p), c) for p, c in (given_apart or {}).items())
             if a in scanned and c != given[scanned[a]]}
    given.update(apart)
    classes += sorted(set(apart.values()) - set(classes))
    if apart:
        notes.append(f"{len(apart)} label(s) given apart from the folders were reviewed instead of their folder.")
    labels = np.asarray([classes.index(given[p]) for p in embedded.paths])
    try:
        return tuple(review_labels(list(embedded.paths), features, labels, classes))
    except ValueError as exc:
        notes.append(str(exc))
        return ()
