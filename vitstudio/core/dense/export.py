"""A segmented folder's masks as COCO and as a table: `masks.coco.json` (one image record per image at its size, one
annotation per class present in it, its pixels as COCO's compressed RLE through pycocotools — the encoding of the
attention masks' export, `analysis/masks.py`) and `areas.csv` (one row per image: its file, then each class's share of
its pixels), read back from the mask PNGs the segmentation wrote."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from vitstudio.core.analysis.masks import rle_encode
from vitstudio.core.dense.segment import SegmentResult
from vitstudio.core.files import SafeCsvWriter, atomic_write_bytes

COCO_NAME, AREAS_NAME = "masks.coco.json", "areas.csv"


def coco_document(result: SegmentResult) -> dict:
    """COCO instances: category k + 1 is class k; a mask's 255 (outside the crop) belongs to none."""
    from pycocotools import mask as coco

    images, annotations = [], []
    for image_id, image in enumerate(result.images, start=1):
        labels = np.asarray(Image.open(image.mask))
        images.append({"id": image_id, "file_name": image.file, "height": labels.shape[0],
                       "width": labels.shape[1]})
        for k in np.unique(labels[labels < len(result.classes)]):
            rle = rle_encode(labels == k)
            raw = {"size": rle["size"], "counts": rle["counts"].encode("ascii")}
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": int(k) + 1,
                                "segmentation": rle, "area": int(coco.area(raw)),
                                "bbox": [float(v) for v in coco.toBbox(raw)], "iscrowd": 1})
    return {"info": {"description": f"segmented by retrieval from {result.painted} painted images, block "
                                    f"{result.layer}"},
            "images": images, "annotations": annotations,
            "categories": [{"id": k + 1, "name": name} for k, name in enumerate(result.classes)]}


def write_exports(result: SegmentResult, out: str | Path, coco: bool, areas: bool) -> list[Path]:
    """OUT/masks.coco.json and/or OUT/areas.csv, each written atomically."""
    written = []
    if coco:
        written.append(Path(out) / COCO_NAME)
        atomic_write_bytes(written[-1], json.dumps(coco_document(result)).encode("utf-8"))
    if areas:
        buffer = io.StringIO(newline="")
        writer = SafeCsvWriter(buffer)
        writer.writerow(["file", *result.classes])
        writer.writerows([image.file, *(image.shares[c] for c in result.classes)] for image in result.images)
        written.append(Path(out) / AREAS_NAME)
        atomic_write_bytes(written[-1], buffer.getvalue().encode("utf-8", "surrogateescape"))
    return written
