"""The Play tab's job: a camera or a video file through the loaded model, frame by frame. Module-level, every input
passed explicitly, run by whichever runner the face gives; the core is imported inside, so the app layer loads no
torch (nor OpenCV) until it runs."""

from __future__ import annotations

import threading


def play_job(cancel, loaded, source: str, method: str | None, record: str | None, shown: threading.Event):
    """Yields (annotated frame, FrameResult, frames/s); returns (frames analysed, frames read, the HeldRecording or
    None)."""
    from vitstudio.core.jobs import prefetched
    from vitstudio.core.play.frames import Rate, annotate
    from vitstudio.core.play.video import FrameSource, HeldRecording, LatestFrame

    latest = LatestFrame(FrameSource(source))  # a file is paced at its own frame rate, a camera at its own
    writer = HeldRecording(record, latest.source.info.fps) if record else None
    rate, analysed = Rate(), 0
    shown.set()  # nothing on screen to wait for yet
    try:
        # the next frame is analysed on a thread of its own while this one is drawn and handed over: the two
        # stages overlap on two cores (the CLI runs them one after the other); one analysed frame waits at most
        for result, frame in prefetched(_analysed(cancel, loaded, latest, method), depth=1, name="vitstudio-play"):
            if cancel.cancelled:
                break
            fps = rate.tick()
            picture = annotate(result, fps, frame=frame)  # the frame with its overlay, not the model's crop
            if writer is not None:
                writer.write(result.index, picture)
            analysed += 1
            # the window has drawn the previous frame (or is busy): at most one frame waits for it, never a
            # backlog; the model works on the next one meanwhile
            shown.wait(1.0)
            shown.clear()
            yield picture, result, fps
        return analysed, latest.read_count, writer if writer is not None and writer.writer is not None else None
    finally:
        latest.close()
        if writer is not None:
            writer.close(latest.read_count)


def _analysed(cancel, loaded, latest, method: str | None):
    """(FrameResult, frame) for each newest frame until the source ends or the session is cancelled."""
    from vitstudio.core.play.frames import analyse_frame

    while not cancel.cancelled and (taken := latest.take(timeout=2.0)) is not None:
        index, t, frame = taken
        yield analyse_frame(loaded, frame, index, t, method), frame


def is_source_error(exc: BaseException) -> bool:
    """The source could not be opened or read (no camera, not a video): said where the user looks, not as a crash."""
    from vitstudio.core.play.video import VideoSourceError

    return isinstance(exc, VideoSourceError)
