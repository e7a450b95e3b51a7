"""What a dataset scan finds (a folder of class folders: datasets.py; a labels file: labels_file.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vitstudio.core.errors import UserFacingError


class DatasetError(UserFacingError):
    """The folder cannot be used as a dataset; the message says why."""


@dataclass(frozen=True)
class DatasetScan:
    root: Path
    classes: tuple[str, ...]
    train: dict[str, tuple[Path, ...]]  # class -> readable image files, sorted
    val: dict[str, tuple[Path, ...]] | None  # present when the root has train/ and val/ (or validation/)
    skipped: tuple[tuple[str, str], ...]  # (path, why) for unreadable or non-image files
    size_range: tuple[tuple[int, int], tuple[int, int]]  # (min (w, h), max (w, h)) over readable images
    too_small: tuple[str, ...]  # classes with fewer than 2 images, which a split cannot divide
    labels_file: Path | None = None  # the CSV the labels came from (core/data/labels_file.py), None for folders

    @property
    def source(self) -> Path:
        """What was scanned, as a run's `data_dir` names it: the labels file, or the folder (a labels file's root is
        its folder, which holds no class folders: a run given the root found nothing to train on)."""
        return self.labels_file or self.root

    @property
    def counts(self) -> dict[str, int]:
        """Images per class over all splits."""
        return {c: len(self.train.get(c, ())) + len((self.val or {}).get(c, ())) for c in self.classes}

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def imbalance_warning(self, ratio: float = 3.0) -> str | None:
        """A sentence when the largest class has at least `ratio` times the images of the smallest."""
        counts = self.counts
        big, small = max(counts, key=counts.get), min(counts, key=counts.get)
        if counts[small] and counts[big] / counts[small] >= ratio:
            return (f"Classes are imbalanced: {big} has {counts[big]} images, {small} only {counts[small]} "
                    f"({counts[big] / counts[small]:.1f}×). Accuracy will favour the large classes; the "
                    f"class-balanced loss (--balance, or 'Balance classes' in the advanced settings) weighs each "
                    f"class equally.")
        return None
