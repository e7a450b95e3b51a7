"""Decoding and eval preprocessing as tensors on the model's device: JPEGs through `torchvision.io.decode_jpeg`
(nvJPEG on a GPU, libjpeg-turbo on a CPU), a batch per call, then timm's eval transform — resize (antialiased,
rounded to uint8 levels like PIL), centre crop, normalise — as tensor operations.

Files are read by the same safe reader as PIL's path (regular files only, bounded size); a JPEG's frame header is
checked against PIL's pixel limit before it is decoded (a 300-byte file may declare 30000×30000 pixels), and one
decoder call takes at most `DECODE_PIXELS` pixels, each image preprocessed before the next call, so a batch of
large photos never sits decoded all at once. Every file the batch decoder rejects is retried alone, and anything
the tensor decoder cannot take (PNG, CMYK, a corrupt or truncated file…) goes through the exact PIL reader
(`images.read_image`): per file, never the batch.
The pixels may differ from the PIL path by the decoder's and resampler's rounding; `tests/core/test_tensor_decode.py`
measures the effect on logits and top-1 on real photos. Used for folder classification and embeddings when the
model runs on a GPU (`decoded_batches(decoder="auto")`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from vitstudio.core.data.images import (
    ImageReadError,
    aspect_box,
    check_pixels,
    read_file_bytes,
    read_image,
)

JPEG_MAGIC = b"\xff\xd8\xff"
DECODE_PIXELS = 64_000_000  # pixels decoded per decode_jpeg call (at most ~190 MB of uint8 RGB at a time)
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers (DHT, JPG, DAC are not)


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's frame header, walking the marker segments up to it; None when there is none
    before the scan (the PIL path then decides)."""
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            i += 2
            continue
        if marker == 0xDA:  # start of scan: no frame header before it
            return None
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if marker in _SOF and i + 9 <= n:
            return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
        i += 2 + length
    return None


def supports(data_config: dict) -> bool:
    """Whether timm's eval transform for this config has a tensor equivalent here (centre or squash crops,
    bilinear or bicubic resampling; not a transformers processor's exact steps); otherwise callers keep the PIL
    path."""
    return (not data_config.get("hf_size") and data_config.get("crop_mode", "center") in ("center", "squash")
            and data_config.get("interpolation", "bilinear") in ("bilinear", "bicubic"))


def read_bytes(path: str) -> tuple[str, bytes | None, str | None]:
    """(path, the file's bytes, None) or (path, None, why): runs on reader threads."""
    try:
        return path, read_file_bytes(path), None  # regular files only, size bounded
    except ImageReadError as exc:
        return path, None, exc.reason


def _pil(path: str, device) -> torch.Tensor:
    import numpy as np

    img = read_image(path)  # raises ImageReadError with the reason
    return torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1).to(device)


def _checked_jpegs(files, out: list) -> list[int]:
    """Indices of the JPEGs to decode as tensors; those whose header declares too many pixels get their error."""
    jpegs = []
    for i, (path, data, err) in enumerate(files):
        if err is not None or data[:3] != JPEG_MAGIC:
            continue
        size = jpeg_size(data)
        try:
            if size is not None:
                check_pixels(path, *size)
            jpegs.append(i)
        except ImageReadError as exc:
            out[i] = (path, None, exc.reason)
    return jpegs


def _groups(indices: list[int], files, budget: int) -> list[list[int]]:
    """Consecutive groups of JPEG indices whose declared pixels sum to at most `budget` (one image at least)."""
    groups, group, total = [], [], 0
    for i in indices:
        w, h = jpeg_size(files[i][1]) or (0, 0)
        if group and total + w * h > budget:
            groups.append(group)
            group, total = [], 0
        group.append(i)
        total += w * h
    return groups + ([group] if group else [])


def _decode_group(files, group: list[int], device) -> dict[int, torch.Tensor]:
    from torchvision.io import ImageReadMode, decode_jpeg

    tensors = [torch.frombuffer(bytearray(files[i][1]), dtype=torch.uint8) for i in group]
    try:
        return dict(zip(group, decode_jpeg(tensors, mode=ImageReadMode.RGB, device=device,
                                           apply_exif_orientation=True)))
    except (RuntimeError, MemoryError):  # one bad file fails the batch call: retry each alone
        decoded = {}
        for i, t in zip(group, tensors):
            try:
                decoded[i] = decode_jpeg(t, mode=ImageReadMode.RGB, device=device, apply_exif_orientation=True)
            except (RuntimeError, MemoryError):
                pass
        return decoded


def decode(files: Sequence[tuple[str, bytes | None, str | None]], device, transform=None
           ) -> list[tuple[str, object, str | None]]:
    """(path, (3, H, W) uint8 tensor on `device` — or `transform` of it — or None, error or None) per file, in
    order. `transform` runs on each image as soon as its group is decoded, so only one group is held decoded."""
    out: list = [None] * len(files)
    jpegs = _checked_jpegs(files, out)

    def finish(i: int, image: torch.Tensor) -> None:
        path = files[i][0]
        try:
            out[i] = (path, image if transform is None else transform(image), None)
        except (RuntimeError, MemoryError) as exc:
            out[i] = (path, None, f"could not be preprocessed ({type(exc).__name__}: {str(exc)[:200]})")

    for group in _groups(jpegs, files, DECODE_PIXELS):
        for i, image in _decode_group(files, group, device).items():
            finish(i, image)
    for i, (path, _data, err) in enumerate(files):
        if out[i] is not None:
            continue
        if err is not None:
            out[i] = (path, None, err)
        else:  # not a JPEG, or one the tensor decoder rejected: the exact PIL reader decides
            try:
                finish(i, _pil(path, device))
            except ImageReadError as exc:
                out[i] = (path, None, exc.reason)
    return out


def eval_preprocess(image: torch.Tensor, data_config: dict) -> torch.Tensor:
    """timm's eval transform on a (3, H, W) uint8 tensor: resize (shorter side to ⌊size / crop_pct⌋, or squash to
    it), centre crop to the input size, scale to [0, 1] and normalise. Returns (3, h, w) float32."""
    _, th, tw = data_config["input_size"]
    crop_pct = data_config.get("crop_pct", 0.875) or 0.875
    sh, sw = math.floor(th / crop_pct), math.floor(tw / crop_pct)
    box = aspect_box(image.shape[2], image.shape[1])
    if box is not None:  # a 1×60000 strip: only its centre, as the PIL reader does (images.cut_extreme_aspect)
        image = image[:, box[1]:box[3], box[0]:box[2]]
    _, h, w = image.shape
    if data_config.get("crop_mode", "center") == "squash":
        size = (sh, sw)
    elif sh == sw:  # torchvision Resize(int): the shorter side to sh, the other in proportion (truncated)
        size = (sh, int(sh * w / h)) if h <= w else (int(sh * h / w), sh)
    else:  # timm's ResizeKeepRatio
        ratio = max(h / sh, w / sw)
        size = (round(h / ratio), round(w / ratio))
    mode = data_config.get("interpolation", "bilinear")
    x = image[None].float()
    if size != (h, w):
        x = F.interpolate(x, size=size, mode=mode, antialias=True, align_corners=False).round_().clamp_(0, 255)
    top, left = int(round((size[0] - th) / 2.0)), int(round((size[1] - tw) / 2.0))  # torchvision's CenterCrop
    x = x[0, :, top:top + th, left:left + tw]
    mean = torch.tensor(data_config["mean"], device=x.device).view(3, 1, 1)
    std = torch.tensor(data_config["std"], device=x.device).view(3, 1, 1)
    return (x / 255.0 - mean) / std
