"""One frame through the model: the prediction (the same `classify` as `predict`, so the numbers are equal) and,
if asked, a registered attention map; then the annotated picture: what the model saw with the map over it and a
caption bar (top class, probability, frames per second, latency). Which maps: `vitstudio.core.play.play_methods`."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vitstudio.core.analysis import overlays
from vitstudio.core.analysis.explain import explain
from vitstudio.core.inference import classify, forward_tap, predictions_from, require_classifier
from vitstudio.core.models import ood

from .video import _cv2

DISPLAY = 448  # the short side of an annotated frame: small crops (32-px digits) are shown enlarged
CAPTION = 28
CAPTION_FONT = 18  # pixels: fits the bar, readable when a wide frame is shown at half its size


@dataclass(frozen=True)
class FrameResult:
    index: int
    time_s: float  # the frame's time in the source
    labels: tuple[str, ...]
    probs: tuple[float, ...]
    latency_ms: float  # from the frame taken to its prediction and map ready
    map: np.ndarray | None = None  # (gh, gw)
    crop: np.ndarray | None = None  # (H, W, 3) uint8: what the model saw
    box: tuple[int, int, int, int] | None = None  # (top, left, height, width) of the crop in the frame

    @property
    def top1(self) -> str:
        """"label  97.1%", or what a headless model (no classes) gives instead."""
        return f"{self.labels[0]}  {self.probs[0] * 100:.1f}%" if self.labels else "no prediction"

    def record(self) -> dict:
        """One line of `--json`: the frame's top-k as `predict --json` gives them."""
        return {"frame": self.index, "time_s": round(self.time_s, 6), "latency_ms": round(self.latency_ms, 3),
                "top": [{"label": label, "prob": prob} for label, prob in zip(self.labels, self.probs)]}


def analyse_frame(loaded, frame: np.ndarray, index: int = 0, time_s: float = 0.0, method: str | None = None,
                  params: dict | None = None, topk: int = 5) -> FrameResult:
    """One frame: its prediction and, with `method`, that map. A headless model (no classes: a DINO backbone, a
    CLIP-style model before its classes are named) plays with a map only, as DINO's attention videos do; asked for
    its prediction alone, it is refused with what to do (NoClassifierHead)."""
    started = time.perf_counter()
    if not method:
        require_classifier(loaded)
    image = Image.fromarray(frame)
    values, pred, crop = None, None, None
    if method:
        with forward_tap(loaded) as seen:  # the map's forward gives the prediction too: one forward, not two
            explained = explain(loaded, method, image, **(params or {}))
        array = explained.array
        values = array.mean(axis=0) if array.ndim == 3 else array
        crop = explained.crop
        if _tapped(loaded, seen):
            pooled = seen["pooled"].numpy() if ood.bank_for(loaded) is not None else None
            pred = predictions_from(loaded, seen["logits"], pooled, ["frame"], topk, [explained.crop])[0]
    if pred is None and loaded.labels:  # no map, or an analysis whose forward is not the model's whole forward
        pred = classify(loaded, [image], topk=topk)[0]
    if pred is not None and pred.crop is not None:
        crop = pred.crop
    crop = np.asarray(crop if crop is not None else loaded.crop(image), dtype=np.uint8)
    labels, probs = (tuple(pred.labels), tuple(float(p) for p in pred.probs)) if pred is not None else ((), ())
    return FrameResult(index, time_s, labels, probs, (time.perf_counter() - started) * 1000, values, crop,
                       crop_box(loaded, frame.shape[:2]))


def crop_box(loaded, frame_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """Where the model's crop lies in a frame of `frame_hw`: (top, left, height, width)."""
    return loaded.crop_box(frame_hw)


def _tapped(loaded, seen: dict) -> bool:
    """The tap saw one image's whole forward: logits over the model's classes (and pooled features)."""
    logits = seen.get("logits")
    return (logits is not None and "pooled" in seen and logits.shape == (1, len(loaded.labels))
            and bool(loaded.labels))


def annotate(result: FrameResult, fps: float | None = None, cmap: str = "inferno", alpha: float = 0.5,
             frame: np.ndarray | None = None) -> np.ndarray:
    """(DISPLAY + CAPTION, W, 3) uint8 with a caption bar below: the frame, the map over the part the model saw
    and a box around it (`frame` given: what the camera or video shows); else the crop the model saw, enlarged."""
    if frame is None or result.box is None:
        picture = result.crop if result.map is None else overlays.overlay(result.map, result.crop, cmap, alpha)
        return _captioned(shown_size(picture, DISPLAY / min(picture.shape[:2])), result, fps)
    scale = DISPLAY / min(frame.shape[:2])
    # shrunk to the pixels shown before the map is coloured and blended: a 720-px frame is a third of the work
    picture = shown_size(np.asarray(frame[..., :3], dtype=np.uint8), scale)
    top, left, h, w = box = _scaled(result.box, scale, picture.shape[:2])
    if result.map is not None:  # OpenCV's blend: numpy's float temporaries of a 448² frame cost ~5 ms in page faults
        seen, cv2 = picture[top:top + h, left:left + w], _cv2()
        seen[:] = cv2.addWeighted(overlays.heatmap(result.map, (h, w), cmap), alpha, seen, 1 - alpha, 0)
    if tuple(result.box[2:]) != frame.shape[:2]:  # the model sees the whole frame: no box to draw
        _outline(picture, box)
    return _captioned(picture, result, fps)


def shown_size(picture: np.ndarray, scale: float) -> np.ndarray:
    """`picture` resampled by `scale`, a new array: enlarged by nearest neighbour from 2× on (small crops stay
    crisp), else bilinearly after averaging whole k×k blocks of a big shrink (OpenCV's integer area path), so a
    1080p frame is ~1 ms without aliasing (area alone at that ratio ~9 ms, Pillow's bilinear ~17 ms)."""
    cv2 = _cv2()
    h, w = picture.shape[:2]
    size = (round(w * scale), round(h * scale))
    if size == (w, h):
        return picture.copy()
    if scale >= 2:
        return cv2.resize(picture, size, interpolation=cv2.INTER_NEAREST_EXACT)  # pixel centres, as Pillow's
    k = int(1 / scale)
    if k >= 2:  # the rows and columns past a multiple of k (fewer than k) are dropped: the fast path needs it
        picture = cv2.resize(picture[:h - h % k, :w - w % k], (w // k, h // k), interpolation=cv2.INTER_AREA)
    return cv2.resize(picture, size, interpolation=cv2.INTER_LINEAR)


def _scaled(box: tuple[int, int, int, int], scale: float, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    top, left = round(box[0] * scale), round(box[1] * scale)
    return top, left, min(round(box[2] * scale), shape[0] - top), min(round(box[3] * scale), shape[1] - left)


def _captioned(picture: np.ndarray, result: FrameResult, fps: float | None) -> np.ndarray:
    bar = Image.new("RGB", (picture.shape[1], CAPTION), (20, 20, 20))
    speed = f"{fps:.1f} fps · " if fps else ""
    caption = f"{result.top1}    {speed}{result.latency_ms:.0f} ms"
    # a scalable font (Pillow's bundled one): the 11-px bitmap default was unreadable once a wide frame was fitted
    # to the Play tab (a 16:9 frame is 796 px wide at DISPLAY); loaded per picture (0.07 ms): a FreeType face is
    # not to be shared between the threads that draw
    font = ImageFont.load_default(size=CAPTION_FONT)
    ImageDraw.Draw(bar).text((8, CAPTION // 2), caption, fill=(240, 240, 240), font=font, anchor="lm")
    return np.concatenate([picture, np.asarray(bar)])


def _outline(picture: np.ndarray, box: tuple[int, int, int, int], width: int = 2) -> None:
    top, left, h, w = box
    colour = np.array((255, 220, 0), np.uint8)
    picture[top:top + width, left:left + w] = picture[top + h - width:top + h, left:left + w] = colour
    picture[top:top + h, left:left + width] = picture[top:top + h, left + w - width:left + w] = colour


class Rate:
    """Frames per second over the last `window` frames."""

    def __init__(self, window: int = 30) -> None:
        self.times: deque[float] = deque(maxlen=window)

    def tick(self) -> float | None:
        self.times.append(time.perf_counter())
        if len(self.times) < 2:
            return None
        return (len(self.times) - 1) / max(self.times[-1] - self.times[0], 1e-9)
