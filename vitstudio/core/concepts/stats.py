"""What each concept is, read from the folder: how often it fires, on how many images, how strongly, its top
images (with the patch where it is strongest), its mean strength per class, and a 2-D map of the concepts'
directions. One streamed pass over the cached tokens (a few images at a time: memory flat in the folder's size)."""

from __future__ import annotations

from collections.abc import Generator, Sequence

import numpy as np

from vitstudio.core.analysis.embeddings import fit_pca
from vitstudio.core.concepts.sae import Concepts
from vitstudio.core.concepts.tokens import FolderTokens
from vitstudio.core.jobs import CancelToken, Progress

TOP_IMAGES = 12
_CODE_ELEMENTS = 1 << 23  # tokens × concepts encoded at once (32 MB float32)


def image_codes(concepts: Concepts, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For (B, P, d) raw tokens: ((B, n) strongest activation per image, (B, n) its patch, (B, n) tokens that fired,
    (B, n) sum of activations)."""
    b, p, d = tokens.shape
    z = concepts.codes(tokens.reshape(-1, d)).reshape(b, p, -1)
    return z.max(1), z.argmax(1), (z > 0).sum(1), z.sum(1)


class _Top:
    """The TOP_IMAGES strongest images of every concept, merged batch by batch."""

    def __init__(self, n: int) -> None:
        self.value = np.full((n, 0), -np.inf, np.float32)
        self.image = np.zeros((n, 0), np.int64)
        self.patch = np.zeros((n, 0), np.int64)

    def add(self, best: np.ndarray, where: np.ndarray, first: int) -> None:
        value = np.concatenate([self.value, best.T], 1)
        image = np.concatenate([self.image, np.broadcast_to(np.arange(first, first + len(best)), best.T.shape)], 1)
        patch = np.concatenate([self.patch, where.T], 1)
        keep = np.argsort(-value, 1, kind="stable")[:, :TOP_IMAGES]
        self.value, self.image, self.patch = (np.take_along_axis(a, keep, 1) for a in (value, image, patch))


def concept_stats(concepts: Concepts, tokens: FolderTokens, classes: Sequence[str] | None = None,
                  cancel: CancelToken | None = None) -> Generator[Progress, None, dict]:
    """{"concepts": [per concept], "classes": [names] (when given), "map": [[x, y] per concept]}."""
    n, files = concepts.size, len(tokens.paths)
    per = max(1, _CODE_ELEMENTS // max(1, tokens.patches * n))
    fired, images, total = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.float64)
    names = sorted(set(classes)) if classes else []
    class_of = np.asarray([names.index(c) for c in classes], np.int64) if classes else None
    class_sum = np.zeros((len(names), n), np.float64)
    top = _Top(n)
    for first in range(0, files, per):
        if cancel is not None:
            cancel.raise_if_cancelled()
        index = np.arange(first, min(files, first + per))
        best, where, count, summed = image_codes(concepts, tokens.of_images(index))
        fired += count.sum(0)
        images += (count > 0).sum(0)
        total += summed.sum(0)
        if class_of is not None:
            np.add.at(class_sum, class_of[index], best)
        top.add(best, where, first)
        yield Progress(int(index[-1]) + 1, files, "Reading what each concept fires on")
    counts = np.bincount(class_of, minlength=len(names)) if class_of is not None else None
    class_means = class_sum / np.maximum(counts, 1)[:, None] if counts is not None else None
    rows = [_concept_row(c, tokens, fired, images, total, top, class_means) for c in range(n)]
    xy = fit_pca(concepts.sae.dictionary.detach().numpy(), 2)
    map_xy = xy.project(concepts.sae.dictionary.detach().numpy())
    return {"concepts": rows, "classes": names, "map": np.round(map_xy, 5).tolist()}


def _concept_row(c: int, tokens: FolderTokens, fired, images, total, top: _Top, class_means) -> dict:
    gw = tokens.grid[1]
    tops = [{"path": tokens.paths[i], "activation": round(float(v), 5), "patch": [int(p) // gw, int(p) % gw]}
            for v, i, p in zip(top.value[c], top.image[c], top.patch[c]) if v > 0]
    row = {"index": c, "frequency": round(float(fired[c]) / max(1, len(tokens.paths) * tokens.patches), 7),
           "images": int(images[c]), "mean_activation": round(float(total[c]) / max(1, int(fired[c])), 5),
           "top_images": tops}
    if class_means is not None:
        row["class_means"] = [round(float(v), 5) for v in class_means[:, c]]
    return row


def outlined_crop(loaded, path: str, patch: tuple[int, int], colour=(0, 255, 255)) -> np.ndarray:
    """(H, W, 3) uint8: the model's crop of the image at `path` with the patch outlined (the browser's top patches)."""
    from vitstudio.core.data.images import read_image

    crop = np.array(loaded.crop(read_image(path)).convert("RGB"))
    ph, pw = loaded.patch_size
    gh, gw = loaded.grid_size
    sy, sx = crop.shape[0] / (gh * ph), crop.shape[1] / (gw * pw)
    top, left = int(patch[0] * ph * sy), int(patch[1] * pw * sx)
    bottom, right = int((patch[0] + 1) * ph * sy) - 1, int((patch[1] + 1) * pw * sx) - 1
    line = max(1, crop.shape[0] // 64)
    for y0, y1, x0, x1 in ((top, top + line, left, right), (bottom - line + 1, bottom + 1, left, right),
                           (top, bottom, left, left + line), (top, bottom, right - line + 1, right + 1)):
        crop[max(0, y0):y1, max(0, x0):x1 + 1] = colour
    return crop
