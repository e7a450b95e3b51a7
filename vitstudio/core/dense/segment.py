"""Paint a few masks, segment the whole folder: the memory bank from the painted images' patch tokens (one block, the
last by default), every image of the folder segmented by retrieval (`retrieval.py`), a PNG of class indices per
image in the output folder at the image's own size.

The tokens are the Concepts cache's (`concepts/tokens.py`: per model and block, keyed by file content), so a folder
read once for concepts or segmented once is not read again: a second segmentation with other masks, k or
temperature costs only the retrieval. On a painted image its painted pixels stand (what the person said wins); the
rest of it is segmented like any other image.

The output folder is built beside and swapped in whole (`core/outputs.py`): never onto the folder or the painted
masks, never over files ViT Studio did not write, never a mix of two runs.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vitstudio.core.concepts.tokens import FolderTokens, check_layer, collect_tokens
from vitstudio.core.data.images import expand_paths
from vitstudio.core.dense.painted import (
    UNPAINTED,
    PaintedMask,
    class_names,
    labels_png,
    match_painted,
    patch_shares,
    upright_size,
)
from vitstudio.core.dense.retrieval import (
    MemoryBank,
    build_bank,
    check_retrieval,
    class_shares,
    pixel_labels,
    vote,
)
from vitstudio.core.dense.settings import DEFAULT_CAP, DEFAULT_K, DEFAULT_TEMPERATURE
from vitstudio.core.files import atomic_write_bytes
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.outputs import Input, check_output_folder, output_folder

from .segment_result import SegmentedImage, SegmentResult

SEGMENT = "segment"  # the command named in an output folder's manifest
CHUNK = 64  # images voted at once
WRITERS = 8  # masks written at once


@dataclass(frozen=True)
class SegmentSettings:
    classes: tuple[str, ...] | None = None  # None: background/object (class-N past two)
    layer: int | None = None  # None: the last block
    k: int = DEFAULT_K
    temperature: float = DEFAULT_TEMPERATURE
    cap: int = DEFAULT_CAP
    cap_method: str = "random"

    def check(self) -> None:
        check_retrieval(self.k, self.temperature, self.cap, self.cap_method)


@dataclass(frozen=True)
class SegmentedLabels:
    """Images segmented without writing their masks (`segment_images`)."""

    classes: tuple[str, ...]
    layer: int
    images: tuple[tuple[str, object], ...]  # (path, (H, W) uint8 class indices, 255 outside the crop; or `keep`'s)
    errors: tuple[tuple[str, str], ...] = ()


def inside(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    a, b = Path(path).resolve(), Path(folder).resolve()
    return a == b or b in a.parents


def segment_inputs(folder: str | os.PathLike, painted_dir: str | os.PathLike | None, allow_inside: bool
                   ) -> list[Input]:
    """What a segmentation reads: its output may lie inside the folder only when asked, and may hold the painted
    masks only as an earlier output's (they are then carried into the new one)."""
    inputs = [Input("the folder being segmented", folder, output_may_be_inside=allow_inside)]
    if painted_dir is not None:
        inputs.append(Input("the painted masks' folder", painted_dir, output_may_hold=True))
    return inputs


def checked_out(out: str | os.PathLike, folder: str | os.PathLike, allow_inside: bool,
                painted_dir: str | os.PathLike | None = None) -> Path:
    """The output folder, refused where it lies inside the dataset folder (unless asked), is a file, is or lies in the
    painted masks' folder, or holds files an earlier segmentation did not write (`core/outputs.py`)."""
    out = Path(out)
    if Path(folder).is_dir() and inside(out, folder) and not allow_inside and not inside(folder, out):
        raise ValueError(f"--out {out} is inside the folder being segmented: its masks would join the folder's "
                         f"images; give another folder (or --out-inside to mean it)")
    return check_output_folder(out, SEGMENT, "--out", segment_inputs(folder, painted_dir, allow_inside))


def unique_stems(files: list[str]) -> None:
    seen: dict[str, str] = {}
    for f in files:
        stem = Path(f).stem
        if stem in seen:
            raise ValueError(f"{Path(seen[stem]).name} and {Path(f).name} share the stem '{stem}': each mask is "
                             f"named by its image's stem, so give them different names")
        seen[stem] = f


def painted_bank(loaded: LoadedModel, tokens: FolderTokens, painted: list[PaintedMask], classes: tuple[str, ...],
                 settings: SegmentSettings) -> MemoryBank:
    """The painted images' patches (those painted at least MIN_PAINTED) with their class shares, capped."""
    where = {p: i for i, p in enumerate(tokens.paths)}
    feats, labels = [], []
    for mask in painted:
        if mask.image not in where:
            continue  # unreadable: reported with the folder's errors
        shares, keep = patch_shares(mask.labels, loaded.crop_box(mask.labels.shape), tokens.grid, loaded.patch_size,
                                    len(classes))
        feats.append(tokens.of_images(np.array([where[mask.image]]))[0][keep])
        labels.append(shares[keep])
    if not feats or not sum(len(f) for f in feats):
        raise ValueError(f"no patch of the crop the model sees is at least half painted (of {len(painted)} painted "
                         f"images): paint larger regions")
    return build_bank(np.concatenate(feats), np.concatenate(labels), classes, settings.cap, settings.cap_method)


def segment_folder(loaded: LoadedModel, folder: str, painted_dir: str, out: str | os.PathLike,
                   settings: SegmentSettings = SegmentSettings(), allow_inside: bool = False,
                   cancel: CancelToken | None = None, coco: bool = False, areas: bool = False,
                   painted_copy: str | None = None) -> Generator[Progress, None, SegmentResult]:
    """Segment every image of `folder` from the masks painted in `painted_dir`, writing OUT/<stem>.png (and
    OUT/masks.coco.json, OUT/areas.csv where asked), OUT built beside and swapped in whole once every file is
    written; cancelled, the earlier OUT stays. `painted_copy` names a folder of OUT given a copy of the painted
    masks (painted masks inside OUT, an earlier export's, are carried over by themselves)."""
    settings.check()
    out = checked_out(out, folder, allow_inside, painted_dir)
    if painted_copy is None and inside(painted_dir, out):
        painted_copy = os.path.relpath(Path(painted_dir).resolve(), out.resolve())
    # the painted masks and the output may live in the folder (with --out-inside): they are not its images
    files = [str(p) for p in expand_paths([folder]) if not inside(p, painted_dir) and not inside(p, out)]
    unique_stems(files)
    painted = match_painted(painted_dir, files)
    classes = class_names(painted, settings.classes)
    layer = check_layer(loaded, loaded.token_depth - 1 if settings.layer is None else settings.layer)
    with output_folder(out, SEGMENT, "--out", segment_inputs(folder, painted_dir, allow_inside)) as building:
        tokens = yield from collect_tokens(loaded, files, layer, cancel=cancel)
        bank = painted_bank(loaded, tokens, painted, classes, settings)
        done = yield from _write_masks(loaded, tokens, bank, settings, {m.image: m.labels for m in painted},
                                       building.path, classes, cancel)
        result = SegmentResult(classes, layer, bank, len(painted), done, tokens.errors, tokens.computed)
        if cancel is not None and cancel.cancelled:
            building.abandon()
            return result
        if painted_copy is not None:
            shutil.copytree(painted_dir, building.path / painted_copy)
        from vitstudio.core.dense.export import write_exports

        exports = write_exports(result, building.path, coco, areas)
    final = [dataclasses.replace(image, mask=str(out / Path(image.mask).name)) for image in done]
    return dataclasses.replace(result, images=final, exports=tuple(str(out / p.name) for p in exports))


def _write_masks(loaded: LoadedModel, tokens: FolderTokens, bank: MemoryBank, settings: SegmentSettings,
                 by_image: dict[str, np.ndarray], folder: Path, classes: tuple[str, ...], cancel: CancelToken | None
                 ) -> Generator[Progress, None, list[SegmentedImage]]:
    """FOLDER/<stem>.png of every image of `tokens`, until cancelled."""
    done: list[SegmentedImage] = []
    # each mask is written atomically (fsync'd): the writes overlap on a few threads, or a folder of small images
    # spends most of its time waiting on the disk
    with ThreadPoolExecutor(WRITERS) as writers:
        for chunk in _labelled(loaded, tokens, np.arange(len(tokens.paths)), bank, settings, by_image, cancel):
            written = [_mask(path, labels, folder, classes, writers) for path, labels in chunk]
            for image, write in written:
                write.result()  # the chunk's writes done; a failed one raises here, naming its file
                done.append(image)
            yield Progress(len(done), len(tokens.paths), "Segmenting images")
    return done


def segment_images(loaded: LoadedModel, files: list[str], painted: list[PaintedMask],
                   settings: SegmentSettings = SegmentSettings(), cancel: CancelToken | None = None,
                   keep: Callable[[np.ndarray], object] | None = None) -> Generator[Progress, None, SegmentedLabels]:
    """Some images (a selection of a folder) segmented from painted masks (the Paint page's, or a painted folder's,
    which may be of images outside `files`), nothing written: each image's (H, W) class indices, or what `keep`
    makes of them as they come (an export's RLE: memory then stays flat in the number of images)."""
    settings.check()
    classes = class_names(painted, settings.classes)
    layer = check_layer(loaded, loaded.token_depth - 1 if settings.layer is None else settings.layer)
    wanted = list(dict.fromkeys(map(str, files)))
    tokens = yield from collect_tokens(loaded, list(dict.fromkeys([*wanted, *(m.image for m in painted)])), layer,
                                       cancel=cancel)
    bank = painted_bank(loaded, tokens, painted, classes, settings)
    chosen = set(wanted)
    index = np.array([i for i, p in enumerate(tokens.paths) if p in chosen], np.int64)
    done: list[tuple[str, object]] = []
    for chunk in _labelled(loaded, tokens, index, bank, settings, {m.image: m.labels for m in painted}, cancel):
        done.extend((path, labels if keep is None else keep(labels)) for path, labels in chunk)
        yield Progress(len(done), len(index), "Segmenting the selection")
    errors = tuple((p, why) for p, why in tokens.errors if p in chosen)
    return SegmentedLabels(classes, layer, tuple(done), errors)


def _labelled(loaded: LoadedModel, tokens: FolderTokens, index: np.ndarray, bank: MemoryBank,
              settings: SegmentSettings, by_image: dict[str, np.ndarray], cancel: CancelToken | None
              ) -> Iterator[list[tuple[str, np.ndarray]]]:
    """[(path, (H, W) uint8 classes)] of the images `index` of `tokens`, CHUNK at a time, until cancelled."""
    for start in range(0, len(index), CHUNK):
        if cancel is not None and cancel.cancelled:
            return
        chunk = index[start:start + CHUNK]
        logits = vote(tokens.of_images(chunk).reshape(-1, tokens.width), bank, settings.k, settings.temperature)
        logits = logits.reshape(len(chunk), *tokens.grid, len(bank.classes))
        yield [(tokens.paths[i], image_labels(loaded, tokens.paths[i], grid_logits, by_image.get(tokens.paths[i])))
               for i, grid_logits in zip(chunk, logits)]


def image_labels(loaded: LoadedModel, path: str, logits: np.ndarray, painted: np.ndarray | None) -> np.ndarray:
    """(H, W) uint8 classes of the image `path` from its (gh, gw, C) patch logits, its painted pixels standing."""
    hw = upright_size(path)
    labels = pixel_labels(logits, hw, loaded.crop_box(hw))
    return labels if painted is None else np.where(painted != UNPAINTED, painted, labels)


def _mask(path: str, labels: np.ndarray, out: Path, classes: tuple[str, ...], writers: ThreadPoolExecutor
          ) -> tuple[SegmentedImage, Future]:
    target = out / f"{Path(path).stem}.png"
    write = writers.submit(atomic_write_bytes, target, labels_png(labels))
    shares = class_shares(labels, len(classes))
    return SegmentedImage(path, str(target), {c: round(float(s), 6) for c, s in zip(classes, shares)}), write
