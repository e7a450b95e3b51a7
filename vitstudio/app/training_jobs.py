"""The Training tab's view jobs (a dataset's scan, the augmentation preview, the memory plan, the results gallery,
the attention-over-training animation): module-level, every input passed explicitly, run by whichever runner the
face gives. Also named here for the tab: what a run reports as it trains (the record kinds), its status and
settings file, the runs listed in History. The core is imported inside each job, and the torch-heavy names when
first asked (PEP 562's module `__getattr__`): the app layer loads no torch until a job runs."""

from __future__ import annotations

from pathlib import Path

GALLERY_MAX = 200  # misclassified images shown in the results gallery
THUMB = 64  # px, the gallery's pictures


def __getattr__(name: str):
    if name in ("EpochMetrics", "HeadStart", "ProbeSnapshot", "RunWarning", "StepProgress"):
        from vitstudio.core.train import engine

        return getattr(engine, name)
    if name == "EvalReport":
        from vitstudio.core.train.evaluation import EvalReport

        return EvalReport
    if name in ("UNFINISHED", "run_status", "RunFileError", "read_train_config", "list_runs"):
        from vitstudio.core.train import runs

        return getattr(runs, name)
    if name == "FINISHED":
        from vitstudio.core.models.run_record import FINISHED

        return FINISHED
    if name == "size_text":
        from vitstudio.core.train.memory_plan import size_text

        return size_text
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def scan_job(cancel, folder: str):
    """The dataset found in `folder` and, when it has no validation split of its own, its groups of identical
    files."""
    from vitstudio.core.data.datasets import exact_duplicate_groups, scan_dataset

    found = scan_dataset(folder)
    return found, exact_duplicate_groups(found) if found.val is None else {}


def preview_job(cancel, paths: list, config, size: tuple[int, int], interpolation: str, crop_pct: float | None):
    """A mosaic of 16 augmented views of `paths` under `config`'s augmentation, or None."""
    from vitstudio.core.analysis.overlays import mosaic_rgb
    from vitstudio.core.train.training_data import preview_augmentation

    views = preview_augmentation(paths, config, size, 16, interpolation, crop_pct)
    return mosaic_rgb(views, columns=4, pad=3) if views else None


def plan_job(cancel, config):
    """The RunPlan of `config`: the memory its run needs at its peak, and whether it fits the device."""
    from vitstudio.core.train.run_plan import plan_for_dataset

    return plan_for_dataset(config)


def make_thumbnails(report) -> dict:
    """Small pictures of the misclassified images for the gallery: path -> PIL image."""
    from vitstudio.core.data.images import ImageReadError, read_image

    out = {}
    for wrong in report.misclassified[:GALLERY_MAX]:
        try:
            thumb = read_image(wrong.path)
        except ImageReadError:
            continue
        thumb.thumbnail((THUMB, THUMB))
        out[wrong.path] = thumb
    return out


def gallery_job(cancel, report):
    """(the EvalReport, the thumbnails of its misclassified images)."""
    return report, make_thumbnails(report)


def animation_job(cancel, run: Path, out: Path) -> Path:
    """The attention over training of `run` (its probe snapshots) written as an animated GIF or MP4 to `out`."""
    from vitstudio.core.train.probe import write_animation

    return write_animation(run, out)
