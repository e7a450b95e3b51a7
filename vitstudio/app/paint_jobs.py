"""The Paint page's jobs: module-level, every input passed explicitly (the painted masks as copies: the page goes on
painting while a job reads them), run by the runner the Folder model was given. The core is imported inside each
job: the app layer loads no torch until a job runs.

The folder is segmented and exported by the core's `segment_folder`, the function under `vitstudio segment`: the
painted masks are saved in the command line's format and read back by it, so what the page exports is what the command
writes from the same painted files."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .paint_masks import PaintMasks, PaintState

# what each slot's result depends on besides the model and the image shown (the page state's CONTEXT); the folder's
# segmentation and export are not of the image shown (selecting another goes on with them): keyed by their own
FOLDER_SLOTS = ("folder", "export")
SLOTS = {"picture": (), "current": ("paths", "revision"), "folder": ("model", "paths"), "export": ("model", "paths")}
PAINTED_NAME = "painted"  # OUT/painted: the painted masks exported beside the masks (`vitstudio segment --masks`)


@dataclass(frozen=True)
class Segmented:
    """One image segmented from the painted ones: its classes per pixel and each class's share of its pixels."""

    image: str
    labels: np.ndarray  # (H, W) uint8 class indices (255 outside the crop the model sees)
    shares: dict[str, float]
    bank: int  # painted patches the segmentation was voted from
    layer: int


def picture_job(cancel, path: str) -> np.ndarray:
    """(H, W, 3) uint8: the image upright, as every core reader sees it (the painting's pixels are these)."""
    from vitstudio.core.data.images import read_image

    return np.asarray(read_image(path))


def _settings(classes: tuple[str, ...]):
    from vitstudio.core.dense.segment import SegmentSettings

    return SegmentSettings(classes=tuple(classes))  # layer, k, temperature and cap: the command line's defaults


def current_job(cancel, loaded, image: str, painted: dict[str, np.ndarray], classes: tuple[str, ...]):
    """The image on screen segmented from the painted images (its own paint standing): the bank and the vote of
    `segment_folder`, for one image, from the tokens the folder's segmentation cached."""
    from vitstudio.core.concepts.tokens import check_layer, collect_tokens
    from vitstudio.core.dense.painted import PaintedMask, class_names
    from vitstudio.core.dense.retrieval import class_shares, vote
    from vitstudio.core.dense.segment import image_labels, painted_bank

    settings = _settings(classes)
    masks = [PaintedMask(path, "", labels) for path, labels in painted.items()]
    names = class_names(masks, settings.classes)
    layer = check_layer(loaded, loaded.token_depth - 1)
    # a generator job (its few progress records go unheard): the image's tokens from the cache, read once if new
    tokens = yield from collect_tokens(loaded, list(dict.fromkeys([image, *painted])), layer, cancel=cancel)
    if image not in tokens.paths:
        raise ValueError(f"{Path(image).name} cannot be read: {dict(tokens.errors).get(image, 'unreadable')}")
    bank = painted_bank(loaded, tokens, masks, names, settings)
    index = np.array([tokens.paths.index(image)])
    logits = vote(tokens.of_images(index)[0], bank, settings.k, settings.temperature).reshape(*tokens.grid,
                                                                                            len(names))
    labels = image_labels(loaded, image, logits, painted.get(image))
    shares = class_shares(labels, len(names))
    return Segmented(image, labels, {c: float(s) for c, s in zip(names, shares)}, len(bank), layer)


def _save_painted(painted: dict[str, np.ndarray], classes: tuple[str, ...], folder: Path) -> None:
    paint = PaintMasks(PaintState(classes=tuple(classes)))
    paint.masks = dict(painted)
    folder.mkdir(parents=True, exist_ok=True)
    paint.save(folder)


def folder_job(cancel, loaded, folder: str, painted: dict[str, np.ndarray], classes: tuple[str, ...]):
    """Every image of `folder` segmented from the painted ones (the masks written to a scratch folder and dropped:
    the page keeps each image's class shares; Export writes them where the user says)."""
    from vitstudio.core.dense.segment import segment_folder

    with tempfile.TemporaryDirectory(prefix="vitstudio-paint-") as scratch:
        _save_painted(painted, classes, Path(scratch) / PAINTED_NAME)
        return (yield from segment_folder(loaded, folder, str(Path(scratch) / PAINTED_NAME), Path(scratch) / "masks",
                                          _settings(classes), cancel=cancel))


def export_job(cancel, loaded, folder: str, painted: dict[str, np.ndarray], classes: tuple[str, ...],
               out: str, inside: bool):
    """OUT/painted/ (the painted masks), OUT/<stem>.png per image, OUT/masks.coco.json and OUT/areas.csv, OUT built
    beside and swapped in whole (an earlier export's painted masks never join the bank); refused inside the dataset
    folder unless `inside`, and over a folder that is not an earlier export (the core's rules). Returns
    (SegmentResult, files written)."""
    from vitstudio.core.dense.segment import checked_out, segment_folder

    checked_out(out, folder, inside)  # refused before anything is written
    with tempfile.TemporaryDirectory(prefix="vitstudio-paint-") as scratch:
        painted_dir = Path(scratch) / PAINTED_NAME
        _save_painted(painted, classes, painted_dir)
        result = yield from segment_folder(loaded, folder, str(painted_dir), out, _settings(classes), inside,
                                           cancel=cancel, coco=True, areas=True, painted_copy=PAINTED_NAME)
    return result, list(result.exports)
