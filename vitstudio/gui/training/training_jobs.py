"""The Training tab's view jobs: module-level, every input passed explicitly (run in workers through `ViewJobs`)."""

from __future__ import annotations

from vitstudio.core.analysis.overlays import mosaic_rgb
from vitstudio.core.data.datasets import exact_duplicate_groups, scan_dataset
from vitstudio.core.train.evaluation import EvalReport
from vitstudio.core.train.training_data import preview_augmentation

from .training_results import make_thumbnails


def scan_job(cancel, folder: str):
    found = scan_dataset(folder)
    return found, exact_duplicate_groups(found) if found.val is None else {}


def preview_job(cancel, paths: list, config, size: tuple[int, int], interpolation: str, crop_pct: float | None):
    views = preview_augmentation(paths, config, size, 16, interpolation, crop_pct)
    return mosaic_rgb(views, columns=4, pad=3) if views else None


def gallery_job(cancel, report: EvalReport) -> tuple[EvalReport, dict]:
    """Runs in a worker: the report with the thumbnails of its misclassified images."""
    return report, make_thumbnails(report)
