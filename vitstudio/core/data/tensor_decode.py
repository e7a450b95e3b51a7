"""Decoding and eval preprocessing as tensors on the model's device: JPEGs through `torchvision.io.decode_jpeg`
(nvJPEG on a GPU, libjpeg-turbo on a CPU), a batch per call, then timm's eval transform — resize (antialiased,
rounded to uint8 levels like PIL), centre crop, normalise — as tensor operations.

Every file the batch decoder rejects is retried alone, and anything the tensor decoder cannot take (PNG, CMYK,
a corrupt or truncated file…) goes through the exact PIL reader (`images.read_image`): per file, never the batch.
The pixels may differ from the PIL path by the decoder's and resampler's rounding; `tests/core/test_tensor_decode.py`
measures the effect on logits and top-1 on real photos. Used for folder classification and embeddings when the
model runs on a GPU (`decoded_batches(decoder="auto")`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from vitstudio.core.data.images import ImageReadError, read_image

JPEG_MAGIC = b"\xff\xd8\xff"


def supports(data_config: dict) -> bool:
    """Whether timm's eval transform for this config has a tensor equivalent here (centre or squash crops,
    bilinear or bicubic resampling); otherwise callers keep the PIL path."""
    return (data_config.get("crop_mode", "center") in ("center", "squash")
            and data_config.get("interpolation", "bilinear") in ("bilinear", "bicubic"))


def read_bytes(path: str) -> tuple[str, bytes | None, str | None]:
    """(path, the file's bytes, None) or (path, None, why): runs on reader threads."""
    try:
        with open(path, "rb") as f:
            return path, f.read(), None
    except OSError as exc:
        return path, None, exc.strerror or str(exc)


def _pil(path: str, device) -> torch.Tensor:
    import numpy as np

    img = read_image(path)  # raises ImageReadError with the reason
    return torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1).to(device)


def decode(files: Sequence[tuple[str, bytes | None, str | None]], device) -> list[tuple[str, object, str | None]]:
    """(path, (3, H, W) uint8 tensor on `device` or None, error or None) per file, in order."""
    from torchvision.io import ImageReadMode, decode_jpeg

    out: list = [None] * len(files)
    jpegs = [i for i, (_, data, err) in enumerate(files) if err is None and data[:3] == JPEG_MAGIC]
    decoded: dict[int, torch.Tensor] = {}
    if jpegs:
        tensors = [torch.frombuffer(bytearray(files[i][1]), dtype=torch.uint8) for i in jpegs]
        try:
            decoded = dict(zip(jpegs, decode_jpeg(tensors, mode=ImageReadMode.RGB, device=device,
                                                  apply_exif_orientation=True)))
        except RuntimeError:  # one bad file fails the batch call: retry each alone
            for i, t in zip(jpegs, tensors):
                try:
                    decoded[i] = decode_jpeg(t, mode=ImageReadMode.RGB, device=device, apply_exif_orientation=True)
                except RuntimeError:
                    pass
    for i, (path, _data, err) in enumerate(files):
        if err is not None:
            out[i] = (path, None, err)
        elif i in decoded:
            out[i] = (path, decoded[i], None)
        else:  # not a JPEG, or one the tensor decoder rejected: the exact PIL reader decides
            try:
                out[i] = (path, _pil(path, device), None)
            except ImageReadError as exc:
                out[i] = (path, None, exc.reason)
    return out


def eval_preprocess(image: torch.Tensor, data_config: dict) -> torch.Tensor:
    """timm's eval transform on a (3, H, W) uint8 tensor: resize (shorter side to ⌊size / crop_pct⌋, or squash to
    it), centre crop to the input size, scale to [0, 1] and normalise. Returns (3, h, w) float32."""
    _, th, tw = data_config["input_size"]
    crop_pct = data_config.get("crop_pct", 0.875) or 0.875
    sh, sw = math.floor(th / crop_pct), math.floor(tw / crop_pct)
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
