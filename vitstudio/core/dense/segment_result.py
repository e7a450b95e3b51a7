"""What segmenting a folder gives (`segment.segment_folder`): each image's mask and class shares, the bank it was
voted from, the errors, and the exports written. Its own module: the exporters (`export.py`) read it and the
segmentation writes them, so neither imports the other's module back."""

from __future__ import annotations

from dataclasses import dataclass, field

from vitstudio.core.dense.retrieval import MemoryBank


@dataclass(frozen=True)
class SegmentedImage:
    file: str
    mask: str  # the PNG written
    shares: dict[str, float]  # each class's share of the image's pixels


@dataclass(frozen=True)
class SegmentResult:
    classes: tuple[str, ...]
    layer: int
    bank: MemoryBank
    painted: int
    images: list[SegmentedImage] = field(default_factory=list)
    errors: tuple[tuple[str, str], ...] = ()
    computed: int = 0  # images whose tokens were read (the rest came from the cache)
    exports: tuple[str, ...] = ()  # masks.coco.json and areas.csv, where written

    def records(self) -> list[dict]:
        return [{"file": r.file, "mask": r.mask, "shares": r.shares} for r in self.images]
