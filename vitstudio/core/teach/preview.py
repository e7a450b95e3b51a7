"""One frame of the Teach tab's live preview: the taught head's probabilities (the same path as the features it was
fitted on) and, when asked, a registered attention map (the Attention tab's methods, through the analysis registry:
`play_methods`) of the model under the head; then the picture the Play tab draws — the frame, the map over the part
the model sees, a caption with the head's top class, frames per second and latency (core/play/frames.annotate)."""

from __future__ import annotations

import time

import numpy as np
from PIL import Image

from vitstudio.core.analysis.explain import explain
from vitstudio.core.play.frames import FrameResult, crop_box
from vitstudio.core.teach.session import image_probabilities


def preview_frame(loaded, live_head, frame: np.ndarray, index: int = 0, time_s: float = 0.0,
                  method: str | None = None) -> FrameResult:
    """`frame` (H, W, 3) uint8 under `live_head` ((classes, head), or None: no bars yet) and `method`'s map (None:
    none; a per-head stack averaged over heads, as Play does). Labels and probabilities come most likely first."""
    started = time.perf_counter()
    image = Image.fromarray(frame)
    labels, probs = (), ()
    if live_head is not None:
        classes, head = live_head
        p = image_probabilities(loaded, head, [image])[0]
        order = np.argsort(-p, kind="stable")
        labels, probs = tuple(classes[i] for i in order), tuple(float(p[i]) for i in order)
    values = None
    if method:
        array = explain(loaded, method, image).array
        values = array.mean(axis=0) if array.ndim == 3 else array
    return FrameResult(index, time_s, labels, probs, (time.perf_counter() - started) * 1000, values, None,
                       crop_box(loaded, frame.shape[:2]))

