"""Frames in and out: a video file or a camera (`camera:N`) read through OpenCV's VideoCapture (files via FFmpeg,
cameras via V4L2 / AVFoundation / Media Foundation, one call on every platform), and an annotated stream written
back with its VideoWriter. Frames travel as RGB uint8 arrays.

Live sources keep only the newest frame (`LatestFrame`): a reader thread drains the source as fast as it delivers
(a camera at its rate, a file at its own frame rate) and holds one frame, so an analysis slower than the source
skips frames instead of falling behind a growing queue; it makes a picture only of the frames handed over."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vitstudio.core.errors import UserFacingError


class VideoSourceError(ValueError, UserFacingError):
    """A source that cannot be opened or read, said in one sentence."""


def _cv2():
    try:
        import cv2
    except ImportError as exc:  # an install without the video dependency
        raise VideoSourceError("Play mode needs OpenCV: pip install opencv-python-headless") from exc
    return cv2


def parse_source(source: str) -> int | str:
    """`camera:N` -> N; anything else is a video file that must exist."""
    if source.startswith("camera:"):
        index = source.partition(":")[2]
        if not index.isdigit():
            raise VideoSourceError(f"'{source}': a camera is named camera:N with N a number (camera:0 is the first).")
        return int(index)
    if not Path(source).is_file():
        raise VideoSourceError(f"No video file at {source} (a camera is named camera:0).")
    return source


@dataclass
class VideoInfo:
    name: str
    fps: float  # the source's frame rate (cameras report theirs; 25 assumed when a file says nothing)
    frames: int | None  # None for cameras and streams of unknown length
    size: tuple[int, int]  # (width, height)
    camera: bool


class FrameSource:
    """Reads RGB frames from a file or a camera; `with FrameSource(...) as src: for i, t, rgb in src: ...`."""

    def __init__(self, source: str) -> None:
        cv2 = _cv2()
        target = parse_source(source)
        self.capture = cv2.VideoCapture(target)
        if not self.capture.isOpened():
            self.capture.release()
            if isinstance(target, int):
                raise VideoSourceError(f"No camera {target} here (none connected, or in use by another program); "
                                       "open a video file instead.")
            raise VideoSourceError(f"Cannot read {source} as a video (not a video, or a codec FFmpeg lacks).")
        fps = self.capture.get(cv2.CAP_PROP_FPS)
        count = int(self.capture.get(cv2.CAP_PROP_FRAME_COUNT))
        size = (int(self.capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(self.capture.get(cv2.CAP_PROP_FRAME_HEIGHT)))
        camera = isinstance(target, int)
        self.info = VideoInfo(source, fps if fps and fps > 0 else 25.0, None if camera or count <= 0 else count,
                              size, camera)
        self._cv2 = cv2

    def read(self) -> np.ndarray | None:
        """The next frame (RGB uint8), or None at the end."""
        ok, bgr = self.capture.read()
        if not ok:
            return None
        return self._cv2.cvtColor(bgr, self._cv2.COLOR_BGR2RGB)

    def grab(self) -> bool:
        """Go past the next frame without making a picture of it (`retrieve` makes one of the frame grabbed last);
        False at the end."""
        return self.capture.grab()

    def retrieve(self) -> np.ndarray | None:
        """The frame grabbed last (RGB uint8), or None if it cannot be converted."""
        ok, bgr = self.capture.retrieve()
        return self._cv2.cvtColor(bgr, self._cv2.COLOR_BGR2RGB) if ok else None

    def __iter__(self):
        """(index, time in s, frame) for every frame, in order."""
        index = 0
        while (frame := self.read()) is not None:
            yield index, index / self.info.fps, frame
            index += 1

    def close(self) -> None:
        self.capture.release()

    def __enter__(self) -> FrameSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LatestFrame:
    """A reader thread over a FrameSource that keeps only the newest frame. Files are paced at their own frame
    rate (as a player would show them); `take()` waits for a frame newer than the last one taken.

    Every frame is grabbed (the decoder must see each one to stay in step), but only a frame that will be taken is
    converted to RGB (`retrieve`): the one grabbed last when a `take()` waits, and a file's last frame. An analysis
    slower than the source then pays for the pictures it shows, not for the ones it skips."""

    def __init__(self, source: FrameSource, paced: bool | None = None) -> None:
        self.source = source
        self.paced = (not source.info.camera) if paced is None else paced
        self._cond = threading.Condition()
        self._frame: tuple[int, float, np.ndarray] | None = None
        self._taken = -1
        self._waiting = False  # a take() waits for a frame newer than the last taken
        self._converted = -1  # the index of the last frame retrieve() was asked for
        self._ended = False
        self._stop = threading.Event()
        self.read_count = 0  # frames read from the source (the index of the next one)
        self.picture_count = 0  # frames made into RGB pictures (the others only grabbed)
        self._thread = threading.Thread(target=self._run, name="vitstudio-frames", daemon=True)
        self._thread.start()

    def _owed(self) -> bool:
        """A take() waits and the frame grabbed last is newer than any it took or converted (holding the lock)."""
        return self._waiting and self.read_count - 1 > max(self._taken, self._converted)

    def _run(self) -> None:
        last = self.source.info.frames
        if self.paced:  # a file's clock starts at the first take(), as a player's at its first picture: the time
            with self._cond:  # the first analysis waits on (a model's warm-up) skips none of the file's first frames
                self._cond.wait_for(lambda: self._stop.is_set() or self._waiting)
        start = time.perf_counter()
        try:
            while not self._stop.is_set():
                with self._cond:  # until the next frame is due, or a take() asks for the one grabbed last
                    due = start + self.read_count / self.source.info.fps if self.paced else 0.0
                    self._cond.wait_for(lambda: self._stop.is_set() or self._owed(),
                                        max(0.0, due - time.perf_counter()))
                    owed = self._owed()
                if self._stop.is_set():
                    break
                if owed:
                    self._publish()
                elif time.perf_counter() >= due:
                    if not self.source.grab():
                        break
                    with self._cond:
                        self.read_count += 1
                    if self.read_count == last:  # a file's last frame stays for the take() after the end
                        self._publish()
        finally:
            with self._cond:
                self._ended = True
                self._cond.notify_all()

    def _publish(self) -> None:
        """The frame grabbed last, converted, becomes the newest frame."""
        index = self._converted = self.read_count - 1
        frame = self.source.retrieve()
        with self._cond:
            if frame is not None:
                self._frame = (index, index / self.source.info.fps, frame)
                self.picture_count += 1
                self._waiting = False  # answered: a frame grabbed before the taker wakes is no longer owed
            self._cond.notify_all()

    def take(self, timeout: float = 5.0) -> tuple[int, float, np.ndarray] | None:
        """The newest frame not taken yet; None once the source has ended (or nothing came within `timeout`)."""
        with self._cond:
            self._waiting = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._ended or (self._frame is not None and self._frame[0] > self._taken),
                                timeout)
            self._waiting = False
            if self._frame is None or self._frame[0] <= self._taken:
                return None
            self._taken = self._frame[0]
            return self._frame

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=5)
        self.source.close()


class VideoWriter:
    """An annotated stream to a file (.mp4 with the mp4v codec OpenCV always has; .avi with MJPG)."""

    def __init__(self, path: str | Path, fps: float, size: tuple[int, int]) -> None:
        cv2 = _cv2()
        self.path, self.size, self._cv2 = Path(path), size, cv2
        codec = "MJPG" if self.path.suffix.lower() == ".avi" else "mp4v"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*codec), fps, size)
        if not self.writer.isOpened():
            raise VideoSourceError(f"Cannot write a video to {self.path} (use a .mp4 or .avi name in a writable "
                                   "folder).")
        self.frames = 0

    def write(self, rgb: np.ndarray) -> None:
        if (rgb.shape[1], rgb.shape[0]) != self.size:
            rgb = self._cv2.resize(rgb, self.size, interpolation=self._cv2.INTER_AREA)
        self.writer.write(self._cv2.cvtColor(np.ascontiguousarray(rgb), self._cv2.COLOR_RGB2BGR))
        self.frames += 1

    def close(self) -> None:
        self.writer.release()


class HeldRecording:
    """The Play tab's recording at its source's frame rate from the frames it analysed: a live session skips the
    frames that arrive while the model is busy, and writing only the analysed ones played the video faster than it
    happened. Each analysed picture stands for every source frame up to the next analysed one (as the screen held
    it), so the recording lasts as long as its source; `held` counts the frames written as a copy."""

    def __init__(self, path: str | Path, fps: float) -> None:
        self.path, self.fps = Path(path), fps
        self.writer: VideoWriter | None = None
        self.last: tuple[int, np.ndarray] | None = None  # (source index, picture) of the last analysed frame
        self.held = 0

    def write(self, index: int, picture: np.ndarray) -> None:
        """The analysed picture of source frame `index` (frames before it not analysed: the previous one, held)."""
        if self.writer is None:
            self.writer = VideoWriter(self.path, self.fps, (picture.shape[1], picture.shape[0]))
        before, held = (self.last[1], index - self.last[0] - 1) if self.last is not None else (picture, index)
        self._hold(before, held)
        self.writer.write(picture)
        self.last = (index, picture)

    def close(self, frames_read: int) -> None:
        """The frames read after the last analysed one hold it too; then the file is complete."""
        if self.writer is None:
            return
        if self.last is not None:
            self._hold(self.last[1], frames_read - self.last[0] - 1)
        self.writer.close()

    def _hold(self, picture: np.ndarray, count: int) -> None:
        for _ in range(max(0, count)):
            self.writer.write(picture)
            self.held += 1
