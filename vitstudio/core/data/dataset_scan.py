"""What a dataset scan finds (a folder of class folders: datasets.py; a labels file: labels_file.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vitstudio.core.data.images import IMAGE_SUFFIXES, UNSUPPORTED_SUFFIXES
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
    def failed(self) -> tuple[tuple[str, str], ...]:
        """(path, why) of the inputs left out that were meant to be used: every row of a labels file a command
        cannot read (missing, not an image, anywhere on disk), and the unreadable images of class folders. Each
        command names every one and exits 1."""
        return tuple(s for s in self.skipped if self.labels_file is not None or not _only_met(*s))

    @property
    def ignored(self) -> tuple[tuple[str, str], ...]:
        """(path, why) of what a folder walk met that is no image to use (notes.txt, a file beside the class
        folders): counted, not a failure. A labels file names its images, so it has none."""
        return tuple(s for s in self.skipped if self.labels_file is None and _only_met(*s))

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


def _only_met(path: str, why: str) -> bool:
    """A file a folder walk passed over that is no read failure: another type (notes.txt), or outside the classes."""
    suffix = Path(path).suffix.lower()
    return why.startswith("not inside a class folder") or (
        why.startswith("not an image file") and suffix not in IMAGE_SUFFIXES and suffix not in UNSUPPORTED_SUFFIXES)
