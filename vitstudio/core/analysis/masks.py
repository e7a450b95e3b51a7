"""Maps to masks, as DINO's `visualize_attention.py` does: keep the highest patches of a map until they hold a
chosen share of its mass (default 60 %), and export the masks as PNG files and COCO run-length encoding.

DINO sorts a head's attention ascending, normalises it to sum 1 and keeps the entries whose cumulative sum exceeds
1 − share; that is the smallest set of highest entries whose mass reaches the share, which is what `mass_mask`
computes (ties between equal values go to the lower patch index). Negative values carry no mass (clipped at 0), so
signed attributions keep their positive evidence.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from vitstudio.core.files import atomic_write_bytes

DEFAULT_SHARE = 0.6


def mass_mask(values: np.ndarray, share: float = DEFAULT_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """(mask, kept share): a bool mask over the last two axes of `values` (one per leading index, e.g. per head)
    keeping the fewest highest cells that hold at least `share` of the map's positive mass."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"The mask share must be in (0, 1], not {share}.")
    values = np.asarray(values, dtype=np.float64)
    maps = np.clip(np.nan_to_num(values.reshape(-1, values.shape[-2] * values.shape[-1]), nan=0.0), 0, None)
    masks, kept = np.zeros(maps.shape, dtype=bool), np.zeros(len(maps))
    for i, m in enumerate(maps):
        total = m.sum()
        if total <= 0:  # nothing to keep: an all-zero (or all-negative) map
            continue
        order = np.lexsort((np.arange(m.size), -m))
        cumulative = np.cumsum(m[order]) / total
        count = int(np.searchsorted(cumulative, share - 1e-12)) + 1  # first place the share is reached
        masks[i, order[:count]] = True
        kept[i] = m[order[:count]].sum() / total
    return masks.reshape(values.shape), kept.reshape(values.shape[:-2])


def to_pixels(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(gh, gw) bool -> (H, W) bool, each patch a block of the crop the model saw (nearest neighbour)."""
    img = Image.fromarray(mask.astype(np.uint8) * 255).resize(size[::-1], Image.NEAREST)
    return np.asarray(img) > 127


def png_bytes(mask: np.ndarray) -> bytes:
    """A mask as an 8-bit greyscale PNG: 255 kept, 0 dropped."""
    buf = io.BytesIO()
    Image.fromarray(mask.astype(np.uint8) * 255, "L").save(buf, format="PNG")
    return buf.getvalue()


def rle_encode(mask: np.ndarray) -> dict:
    """COCO's compressed RLE ({'size': [h, w], 'counts': str}) through pycocotools."""
    from pycocotools import mask as coco

    rle = coco.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")}


@dataclass
class MaskExport:
    """The masks of one method over several images: a PNG per map as it comes, and one COCO JSON at the end."""

    folder: Path
    method: str
    share: float = DEFAULT_SHARE
    images: list = field(default_factory=list)
    annotations: list = field(default_factory=list)

    def add(self, values: np.ndarray, crop_size: tuple[int, int], name: str,
            placed: tuple[tuple[int, int], tuple[int, int, int, int]] | None = None) -> list[Path]:
        """Write `name`.<method>.mask.png (one per map: …mask-<k>.png when the result holds several) and remember
        each as an annotation of the JSON. `placed`: (the image's (H, W), where the model's crop lies in it as (top,
        left, h, w)): the mask is the image's size, the crop's part drawn where it lies and nothing outside (what
        the model never saw), so the PNG and the COCO record describe the image named. Without it, the crop's size
        would be recorded as the image's."""
        masks, kept = mass_mask(values, self.share)
        flat, shares = masks.reshape(-1, *masks.shape[-2:]), np.ravel(kept)
        image_id = len(self.images) + 1
        (h, w), (top, left, bh, bw) = placed if placed is not None else (crop_size, (0, 0, *crop_size))
        self.images.append({"id": image_id, "file_name": name, "height": h, "width": w})
        written = []
        for k, (mask, share) in enumerate(zip(flat, shares)):
            pixels = np.zeros((h, w), dtype=bool)
            pixels[top:top + bh, left:left + bw] = to_pixels(mask, (bh, bw))
            path = self.folder / f"{name}.{self.method}.mask{'' if len(flat) == 1 else f'-{k}'}.png"
            atomic_write_bytes(path, png_bytes(pixels))
            written.append(path)
            self.annotations.append(self._annotation(pixels, image_id, k, float(share)))
        return written

    def _annotation(self, pixels: np.ndarray, image_id: int, k: int, share: float) -> dict:
        from pycocotools import mask as coco

        rle = rle_encode(pixels)
        raw = {"size": rle["size"], "counts": rle["counts"].encode("ascii")}
        return {"id": len(self.annotations) + 1, "image_id": image_id, "category_id": 1, "map_index": k,
                "segmentation": rle, "area": int(coco.area(raw)), "bbox": [float(v) for v in coco.toBbox(raw)],
                "iscrowd": 1, "kept_share": share}

    def finish(self) -> Path:
        """<method>.masks.json in COCO's format (instances with RLE segmentations)."""
        doc = {"info": {"description": f"{self.method} maps kept to {self.share:.0%} of their mass (DINO-style)",
                        "mask_share": self.share},
               "images": self.images, "annotations": self.annotations,
               "categories": [{"id": 1, "name": f"{self.method} mask"}]}
        path = self.folder / f"{self.method}.masks.json"
        atomic_write_bytes(path, json.dumps(doc, indent=1).encode("utf-8"))
        return path
