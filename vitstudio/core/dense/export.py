"""A segmented folder's masks as COCO and as a table: `masks.coco.json` (one image record per image at its size, one
annotation per class present in it, its pixels as COCO's compressed RLE through pycocotools — the encoding of the
attention masks' export, `analysis/masks.py`) and `areas.csv` (one row per image: its file, then each class's share of
its pixels), read back from the mask PNGs the segmentation wrote."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from PIL import Image

from vitstudio.core.analysis.masks import rle_encode
from vitstudio.core.dense.painted import UNPAINTED
from vitstudio.core.dense.segment_result import SegmentResult
from vitstudio.core.files import SafeCsvWriter, atomic_write_bytes

COCO_NAME, AREAS_NAME = "masks.coco.json", "areas.csv"


def coco_document(result: SegmentResult) -> dict:
    """COCO instances: category k + 1 is class k; a mask's 255 (outside the crop) belongs to none."""
    return coco_from_labels(((image.file, np.asarray(Image.open(image.mask))) for image in result.images),
                            result.classes, f"segmented by retrieval from {result.painted} painted images, block "
                                            f"{result.layer}")


def coco_from_labels(images: Iterable[tuple[str, np.ndarray]], classes: tuple[str, ...], description: str) -> dict:
    """COCO instances of (file, (H, W) class indices) pairs: an image record each at its size, an annotation per class
    present in it (compressed RLE, `iscrowd` 1 as COCO's RLE annotations are), category k + 1 for class k."""
    return coco_assembled(((file, coco_masks(labels, len(classes))) for file, labels in images), classes,
                          description)


def coco_masks(labels: np.ndarray, classes: int = UNPAINTED) -> tuple[tuple[int, int], list[dict]]:
    """((H, W), an annotation without ids per class below `classes` present in the (H, W) class indices): what COCO
    keeps of an image's mask, a few hundred bytes where the mask is H·W (an export of 100k images keeps these)."""
    from pycocotools import mask as coco

    found = []
    for k in np.unique(labels[labels < classes]):
        rle = rle_encode(labels == k)
        raw = {"size": rle["size"], "counts": rle["counts"].encode("ascii")}
        found.append({"category_id": int(k) + 1, "segmentation": rle, "area": int(coco.area(raw)),
                      "bbox": [float(v) for v in coco.toBbox(raw)], "iscrowd": 1})
    return (int(labels.shape[0]), int(labels.shape[1])), found


def coco_assembled(images: Iterable[tuple[str, tuple[tuple[int, int], list[dict]]]], classes: tuple[str, ...],
                   description: str) -> dict:
    """The COCO document of (file, `coco_masks`) pairs: images and annotations numbered from 1 in order."""
    records, annotations = [], []
    for image_id, (file, ((height, width), found)) in enumerate(images, start=1):
        records.append({"id": image_id, "file_name": file, "height": height, "width": width})
        annotations += [{"id": len(annotations) + i + 1, "image_id": image_id, **a} for i, a in enumerate(found)]
    return {"info": {"description": description}, "images": records, "annotations": annotations,
            "categories": [{"id": k + 1, "name": name} for k, name in enumerate(classes)]}


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
