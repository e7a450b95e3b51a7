"""A generated video for the play tests and benchmark: digits sliding across a white page (a new digit every few
frames), written losslessly enough to read back (MJPG .avi, or mp4v .mp4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def moving_digits_video(path: Path, frames: int = 24, size: int = 96, fps: float = 12.0) -> Path:
    from vitstudio.core.models.demo import digit_scans  # load_digits' file, without importing sklearn (~1.5 s)
    from vitstudio.core.play.video import VideoWriter

    images = digit_scans()[0]
    writer = VideoWriter(path, fps, (size, size))
    for i in range(frames):
        pixels = images[i // 4]
        ink = (255 - pixels / 16.0 * 255).astype(np.uint8)
        digit = np.asarray(Image.fromarray(ink, "L").resize((size // 2, size // 2), Image.BILINEAR).convert("RGB"))
        page = np.full((size, size, 3), 255, np.uint8)
        x = (i * 3) % (size // 2)  # the digit slides right, then starts again
        page[size // 4:size // 4 + size // 2, x:x + size // 2] = digit
        writer.write(page)
    writer.close()
    return path
