"""A whole play session without a window (the CLI, tests, the benchmark): every frame of a file in order (one
annotated output frame per input frame), or a camera live (newest frame only) until `max_frames` or a cancel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from vitstudio.core.jobs import CancelToken

from .frames import FrameResult, Rate, analyse_frame, annotate
from .video import FrameSource, LatestFrame, VideoWriter


def frames_of(source: FrameSource, live: bool) -> Iterator[tuple[int, float, object]]:
    if not live:
        yield from source
        return
    latest = LatestFrame(source)
    try:
        while (taken := latest.take()) is not None:
            yield taken
    finally:
        latest.close()


def play(loaded, source: str, method: str | None = None, params: dict | None = None, out: str | Path | None = None,
         json_path: str | Path | None = None, live: bool | None = None, max_frames: int | None = None,
         cancel: CancelToken | None = None, cmap: str = "inferno") -> Iterator[tuple[FrameResult, float | None]]:
    """Yields (result, frames per second so far) per analysed frame; writes the annotated video and the JSON lines
    as it goes. `live` defaults to True for cameras and False for files."""
    src = FrameSource(source)
    live = src.info.camera if live is None else live
    writer = records = None
    rate = Rate()
    try:
        if json_path is not None:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            records = open(json_path, "w", encoding="utf-8")  # noqa: SIM115 (closed in finally)
        for n, (index, t, frame) in enumerate(frames_of(src, live)):
            if (cancel is not None and cancel.cancelled) or (max_frames is not None and n >= max_frames):
                break
            result = analyse_frame(loaded, frame, index, t, method, params)
            fps = rate.tick()
            if out is not None:
                picture = annotate(result, fps, cmap, frame=frame)  # the frame, the map over what the model saw
                if writer is None:
                    writer = VideoWriter(out, src.info.fps, (picture.shape[1], picture.shape[0]))
                writer.write(picture)
            if records is not None:
                records.write(json.dumps(result.record()) + "\n")
            yield result, fps
    finally:
        if writer is not None:
            writer.close()
        if records is not None:
            records.close()
        src.close()
