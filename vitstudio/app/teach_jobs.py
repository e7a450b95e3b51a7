"""The Teach tab's jobs: module-level, every input passed explicitly, run by whichever runner the face gives (the
window's workers, a script's own thread). The core is imported inside each job: the app layer loads no torch until a
job runs."""

from __future__ import annotations

import threading


def refit_job(cancel, loaded, root: str, recipe: str):
    """Generator: Progress while new samples are embedded (the rest come from the cache); returns the TeachResult, or
    for a CLIP-style model whose classes lack samples the zero-shot head of the card names (core/teach/words.py)."""
    from vitstudio.core.teach.project import open_project
    from vitstudio.core.teach.session import refit

    return (yield from refit(loaded, open_project(root), recipe, cancel))


def preview_job(cancel, loaded, source: str, method: str | None, teach, shown: threading.Event):
    """Yields (frame, its time in s, {class: probability} under the live head or None, frames/s, the picture drawn:
    the frame with `method`'s map over what the model sees, its caption: the top class, frames/s, latency) for the
    newest frame of a video file or camera (a slow model skips frames, never queues them); returns the frames read.
    The head is read from `teach.live_head` ((classes, head) of the newest refit) at every frame: a refit that lands
    mid-preview is used from the next frame on."""
    from vitstudio.core.play.frames import CAPTION, Rate, annotate
    from vitstudio.core.play.video import FrameSource, LatestFrame
    from vitstudio.core.teach.preview import preview_frame

    latest, rate = LatestFrame(FrameSource(source)), Rate()
    shown.set()
    try:
        while not cancel.cancelled and (taken := latest.take(timeout=2.0)) is not None:
            index, time_s, frame = taken
            result = preview_frame(loaded, teach.live_head, frame, index, time_s, method)
            probs = dict(zip(result.labels, result.probs)) if result.labels else None
            fps = rate.tick()
            # off the GUI thread, as the Play tab's; the caption bar cut off: the tab writes it in its own font
            picture = annotate(result, fps, frame=frame)[:-CAPTION]
            caption = "  ·  ".join([result.top1 if result.labels else "nothing taught yet",
                                    *([f"{fps:.1f} frames/s"] if fps else []), f"{result.latency_ms:.0f} ms"])
            shown.wait(1.0)  # the window drew the previous frame: at most one waits, never a backlog
            shown.clear()
            yield frame, time_s, probs, fps, picture, caption
        return latest.read_count
    finally:
        latest.close()


def export_job(cancel, loaded, result, folder: str):
    """The taught model written as a timm run folder, ONNX and the seed format, each run on every sample and
    compared with the app's prediction (core/teach/export.py); returns the TeachExport."""
    from vitstudio.core.teach.export import export_taught

    return export_taught(loaded, result, folder)
