"""transformers' image processors (ViT, DeiT, BEiT, BiT/DINOv2), reproduced pixel for pixel on PIL images.

A processor resizes to a fixed height × width (no aspect kept) or its shortest edge to N (the long edge truncated,
`int(N · long / short)`), with PIL and its own resample filter, then centre-crops with the margins floored
(`(H - h) // 2`), rescales (×1/255) and normalises. timm's eval transform cannot say all of that: one crop_pct for
both sides (a non-square resize before a crop is flattened), `floor(crop / crop_pct)` that loses a pixel to float
rounding, rounded crop margins, and a keep-ratio resize for a non-square crop after a shortest-edge resize. So a
converted model's data config carries the processor's size under `hf_size` and `eval_transform` builds the exact
steps from it; the timm keys (crop_pct, crop_mode) beside it are the nearest timm equivalent, for display and for
plain timm. Options the steps cannot reproduce are refused by name.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from PIL import Image

# PIL resample codes used by transformers' image processors, and timm's names for them
RESAMPLE = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
_PIL_FILTER = {name: code for code, name in RESAMPLE.items()}
# processor options that change nothing the model sees (labels, formats, RGB conversion: images are read as RGB)
_HARMLESS = {"do_convert_rgb", "do_reduce_labels", "do_flip_channel_order"}
_HANDLED = {"do_resize", "do_center_crop", "do_rescale", "do_normalize"}


class ProcessorError(ValueError):
    """A preprocessor_config.json option ViT Studio cannot reproduce exactly; the message names it."""


def read_processor(folder: Path) -> dict:
    path = folder / "preprocessor_config.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def data_config(proc: dict, input_hw: tuple[int, int], where: str = "preprocessor_config.json") -> dict:
    """The data config (timm keys + `hf_size`) reproducing a transformers processor `proc` exactly; `input_hw`
    is the size used when the folder has no processor (transformers' defaults: squash to it, mean = std = 0.5)."""
    unknown = sorted(k for k, v in proc.items() if k.startswith("do_") and v and k not in _HANDLED | _HARMLESS)
    if unknown:
        raise ProcessorError(f"{where}: {', '.join(unknown)} cannot be reproduced by ViT Studio.")
    if not proc.get("do_resize", True):
        raise ProcessorError(f"{where}: do_resize=false keeps every image at its own size; ViT Studio needs a fixed "
                             "input size.")
    size = _size(proc.get("size", {"height": input_hw[0], "width": input_hw[1]}), proc, where)
    resample = proc.get("resample", 2)
    if resample not in RESAMPLE:
        raise ProcessorError(f"{where}: resample={resample!r} is not a PIL filter (0-5).")
    crop = _square(proc.get("crop_size"), where) if proc.get("do_center_crop") else None
    if "shortest_edge" in size:
        edge = size["shortest_edge"]
        if crop is None:
            raise ProcessorError(f"{where}: shortest-edge resizing without a centre crop gives every image its own "
                                 "size; ViT Studio needs a fixed input size.")
        if max(crop) > edge:
            raise ProcessorError(f"{where}: crop_size {crop[0]}×{crop[1]} is larger than shortest_edge {edge} "
                                 "(transformers pads with black then); not supported.")
        timm_keys = dict(crop_pct=_crop_pct(crop[0], edge), crop_mode="center")
    else:
        resize = (size["height"], size["width"])
        if crop is not None and (crop[0] > resize[0] or crop[1] > resize[1]):
            raise ProcessorError(f"{where}: crop_size {crop[0]}×{crop[1]} is larger than size {resize[0]}×"
                                 f"{resize[1]} (transformers pads with black then); not supported.")
        crop = crop or resize
        timm_keys = dict(crop_pct=_crop_pct(crop[0], resize[0]), crop_mode="squash")
    return dict(input_size=(3, *crop), interpolation=RESAMPLE[resample], **_normalisation(proc, where),
                **timm_keys, hf_size=size)


def _size(size, proc: dict, where: str) -> dict:
    if isinstance(size, int):  # legacy: a square, or the shortest edge for BiT (DINOv2) processors
        shortest = "Bit" in str(proc.get("image_processor_type", "")) or proc.get("default_to_square") is False
        return {"shortest_edge": size} if shortest else {"height": size, "width": size}
    keys = {k for k, v in size.items() if v is not None}
    if keys not in ({"height", "width"}, {"shortest_edge"}):
        named = ", ".join(sorted(keys - {"height", "width", "shortest_edge"})) or ", ".join(sorted(keys))
        raise ProcessorError(f"{where}: size {size} ({named}) cannot be reproduced; ViT Studio reproduces "
                             "{height, width} or {shortest_edge}.")
    if "shortest_edge" in keys:
        return {"shortest_edge": int(size["shortest_edge"])}
    return {"height": int(size["height"]), "width": int(size["width"])}


def _square(crop, where: str) -> tuple[int, int]:
    if isinstance(crop, int):
        return crop, crop
    if not isinstance(crop, dict) or "height" not in crop or "width" not in crop:
        raise ProcessorError(f"{where}: crop_size {crop!r} needs height and width.")
    return int(crop["height"]), int(crop["width"])


def _crop_pct(crop: int, resize: int) -> float:
    """crop / resize, nudged down where timm's floor(crop / crop_pct) would lose a pixel to rounding."""
    pct = crop / resize
    while math.floor(crop / pct) < resize:
        pct = math.nextafter(pct, 0.0)
    return pct


def _normalisation(proc: dict, where: str) -> dict:
    """mean and std applied to [0, 1] pixels (what ToTensor gives): a rescale factor other than 1/255 (or none)
    is folded into them, (x·r - m) / s = (x/255 - m/(255r)) / (s/(255r))."""
    if proc.get("do_normalize", True):
        mean, std = (_triple(proc.get(k, 0.5), k, where) for k in ("image_mean", "image_std"))
    else:
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    r = float(proc.get("rescale_factor", 1 / 255)) if proc.get("do_rescale", True) else 1.0
    if abs(r * 255 - 1) < 1e-12:
        return dict(mean=mean, std=std)
    return dict(mean=tuple(m / (255 * r) for m in mean), std=tuple(s / (255 * r) for s in std))


def _triple(value, key: str, where: str) -> tuple[float, float, float]:
    values = [float(value)] * 3 if isinstance(value, (int, float)) else [float(v) for v in value]
    if len(values) != 3:
        raise ProcessorError(f"{where}: {key} needs 3 values (RGB), got {len(values)}.")
    return tuple(values)


def resized_hw(height: int, width: int, hf_size: dict) -> tuple[int, int]:
    """The (height, width) a processor resizes an image of this size to."""
    if "shortest_edge" not in hf_size:
        return int(hf_size["height"]), int(hf_size["width"])
    edge = int(hf_size["shortest_edge"])
    if width <= height:  # transformers' get_resize_output_image_size: the long edge truncated
        return int(edge * height / width), edge
    return edge, int(edge * width / height)


class ProcessorResize:
    """PIL resize to the processor's size (fixed, or shortest edge), with its filter, as transformers does."""

    def __init__(self, hf_size: dict, interpolation: str) -> None:
        self.hf_size, self.resample = dict(hf_size), _PIL_FILTER.get(interpolation, Image.BICUBIC)

    def __call__(self, image: Image.Image) -> Image.Image:
        h, w = resized_hw(image.height, image.width, self.hf_size)
        return image if (w, h) == image.size else image.resize((w, h), resample=self.resample)

    def __repr__(self) -> str:
        return f"ProcessorResize({self.hf_size}, resample={self.resample})"


class FlooredCenterCrop:
    """Centre crop with the margins floored, as transformers' center_crop ((H - h) // 2); torchvision rounds."""

    def __init__(self, hw: tuple[int, int]) -> None:
        self.hw = tuple(int(v) for v in hw)

    def __call__(self, image: Image.Image) -> Image.Image:
        (h, w), (ih, iw) = self.hw, (image.height, image.width)
        top, left = (ih - h) // 2, (iw - w) // 2
        return image if (ih, iw) == (h, w) else image.crop((left, top, left + w, top + h))

    def __repr__(self) -> str:
        return f"FlooredCenterCrop({self.hw})"


def processor_transform(cfg: dict):
    """The eval transform of a data config carrying `hf_size`: resize, floored crop, ToTensor, Normalize."""
    from torchvision import transforms

    return transforms.Compose([
        ProcessorResize(cfg["hf_size"], cfg.get("interpolation", "bilinear")),
        FlooredCenterCrop(tuple(cfg["input_size"][1:])),
        transforms.ToTensor(),
        transforms.Normalize(mean=cfg["mean"], std=cfg["std"]),
    ])
