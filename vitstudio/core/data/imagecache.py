"""A decoded-image cache: every training image decoded once (EXIF-corrected RGB), resized so its short side is a
bit above the training size, kept as uint8 — in memory, or memory-mapped from a cache file outside the dataset.

The file is keyed by every image's path, size and mtime plus the stored size, so an edited dataset gets a new cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from vitstudio.core.data.images import ImageReadError, read_image
from vitstudio.core.files import atomic_write_bytes
from vitstudio.core.files import cache_dir as app_cache_dir
from vitstudio.core.jobs import CancelToken, Progress

SHORT_SIDE_MARGIN = 1.5  # 224 -> 336: the median random-resized crop (~0.73 of the side) is still downsampled


def cache_dir() -> Path:
    return app_cache_dir() / "decoded"


def short_side_for(train_size: int) -> int:
    return int(np.ceil(train_size * SHORT_SIDE_MARGIN))


@dataclass
class DecodedImages:
    """Variable-sized uint8 images in one flat buffer: image k is data[offsets[k]: …].reshape(shapes[k])."""

    data: np.ndarray  # (total,) uint8, in memory or np.memmap
    offsets: np.ndarray  # (n,) int64
    shapes: np.ndarray  # (n, 3) int32: H, W, 3
    failed: dict[str, str]  # path -> reason, for images that could not be decoded
    bad: list[int]  # their indices (stored as 1×1 placeholders so that indices stay aligned)

    def __len__(self) -> int:
        return len(self.offsets)

    def image(self, k: int) -> np.ndarray:
        h, w, c = self.shapes[k]
        start = int(self.offsets[k])
        return self.data[start: start + h * w * c].reshape(h, w, c)

    @property
    def nbytes(self) -> int:
        return int(self.data.shape[0])


def cache_key(paths: Sequence[Path], short_side: int, decoder: str = "pil") -> str:
    digest = hashlib.sha1(f"v1:{short_side}".encode() + (b"" if decoder == "pil" else f":{decoder}".encode()))
    for p in paths:
        st = Path(p).stat()
        digest.update(os.fsencode(f"{Path(p).resolve()}|{st.st_size}|{st.st_mtime_ns}\n"))  # any file name
    return digest.hexdigest()[:20]


def _resize_short_side(img: Image.Image, short_side: int) -> Image.Image:
    w, h = img.size
    scale = short_side / min(w, h)
    if scale >= 1:  # never upsample: a small image stays as it is
        return img
    return img.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BICUBIC, reducing_gap=None)


def _pil_images(paths: Sequence[Path], short_side: int) -> Iterator[tuple[np.ndarray | None, str | None]]:
    for path in paths:
        try:
            yield np.asarray(_resize_short_side(read_image(path), short_side), dtype=np.uint8), None
        except ImageReadError as exc:
            yield None, exc.reason


def _tensor_images(paths: Sequence[Path], short_side: int, device, batch: int = 64
                   ) -> Iterator[tuple[np.ndarray | None, str | None]]:
    """The same images decoded a batch at a time on `device` (nvJPEG on a GPU; PIL for what it cannot take),
    resized there (antialiased bicubic, never upsampled, rounded like PIL) and brought back as uint8."""
    from concurrent.futures import ThreadPoolExecutor

    import torch
    import torch.nn.functional as F

    from vitstudio.core.data import tensor_decode
    from vitstudio.core.data.images import aspect_box

    def shrink(image: torch.Tensor) -> np.ndarray:
        box = aspect_box(image.shape[2], image.shape[1])
        if box is not None:  # a 1×60000 strip keeps its centre, as read_image does
            image = image[:, box[1]:box[3], box[0]:box[2]]
        _, h, w = image.shape
        scale = short_side / min(h, w)
        if scale < 1:
            size = (max(1, round(h * scale)), max(1, round(w * scale)))
            image = F.interpolate(image[None].float(), size=size, mode="bicubic", antialias=True,
                                  align_corners=False)[0].round_().clamp_(0, 255).to(torch.uint8)
        return image.permute(1, 2, 0).contiguous().cpu().numpy()

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        for start in range(0, len(paths), batch):
            files = list(pool.map(tensor_decode.read_bytes, [str(p) for p in paths[start:start + batch]]))
            for _, image, err in tensor_decode.decode(files, device, transform=shrink):  # resized group by group
                yield (None, err) if image is None else (image, None)


def build_cache(paths: Sequence[Path], short_side: int, memory_budget: int = 2 << 30,
                folder: Path | None = None, cancel: CancelToken | None = None, device=None,
                decoder: str = "auto") -> Iterator[Progress]:
    """Generator: yields Progress while decoding, returns DecodedImages (`cache = yield from build_cache(...)`).

    Reuses a cache file with the same key; keeps the result in memory when it fits `memory_budget` bytes,
    otherwise writes it to `folder` (default: `decoded/` in the app's cache folder) and memory-maps it. Decoding is
    PIL's, one file at a time, or (decoder 'tensor', or 'auto' with a CUDA `device`) batches decoded on the device.
    """
    folder = folder or cache_dir()
    on_device = decoder == "tensor" or (decoder == "auto" and device is not None and device.type == "cuda")
    key = cache_key(paths, short_side, "tensor" if on_device else "pil")
    data_file, index_file = folder / f"{key}.u8", folder / f"{key}.json"
    if data_file.exists() and index_file.exists():
        yield Progress(len(paths), len(paths), "Decoded-image cache found")
        return _read_cache(data_file, index_file, memory_budget)
    chunks: list[np.ndarray] = []  # in memory while the running total fits the budget
    spill = None  # the cache file once it does not
    shapes, failed, bad, total = [], {}, [], 0
    folder.mkdir(parents=True, exist_ok=True)
    tmp = data_file.with_suffix(".u8.tmp")
    try:
        images = _tensor_images(paths, short_side, device or "cpu") if on_device else _pil_images(paths, short_side)
        for n, (path, (im, error)) in enumerate(zip(paths, images), 1):
            if cancel is not None:
                cancel.raise_if_cancelled()
            if im is None:
                failed[str(path)] = error
                bad.append(n - 1)
                im = np.zeros((1, 1, 3), np.uint8)  # keeps indices aligned; the sampler skips it
            shapes.append(im.shape)
            total += im.size
            if spill is None and total > memory_budget:
                spill = tmp.open("wb")
                for chunk in chunks:
                    spill.write(chunk.tobytes())
                chunks.clear()
            if spill is not None:
                spill.write(im.tobytes())
            else:
                chunks.append(im.reshape(-1))
            if n % 16 == 0 or n == len(paths):
                yield Progress(n, len(paths), "Decoding images once for all epochs")
    except BaseException:
        if spill is not None:
            spill.close()
            tmp.unlink(missing_ok=True)
        raise
    return _finish_cache(chunks, spill, tmp, data_file, index_file, shapes, failed, bad)


def _read_cache(data_file: Path, index_file: Path, memory_budget: int) -> DecodedImages:
    """A cache file written by an earlier `build_cache`: memory-mapped, or read into memory when it fits."""
    index = json.loads(index_file.read_text())
    data = np.memmap(data_file, dtype=np.uint8, mode="r")
    if data.shape[0] <= memory_budget:
        data = np.array(data)  # small enough: read it into memory once
    return DecodedImages(data, np.asarray(index["offsets"], np.int64), np.asarray(index["shapes"], np.int32),
                         index["failed"], index["bad"])


def _finish_cache(chunks: list[np.ndarray], spill, tmp: Path, data_file: Path, index_file: Path, shapes: list,
                  failed: dict, bad: list) -> DecodedImages:
    """The decoded images: in memory (`chunks`), or the spilled file moved into place with its index."""
    shapes_arr = np.asarray(shapes, np.int32).reshape(-1, 3)
    sizes = shapes_arr.prod(axis=1).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(sizes) else np.zeros(0, np.int64)
    if spill is None:
        data = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
        return DecodedImages(data, offsets, shapes_arr, failed, bad)
    spill.close()
    os.replace(tmp, data_file)
    atomic_write_bytes(index_file, json.dumps({"offsets": offsets.tolist(), "shapes": shapes_arr.tolist(),
                                               "failed": failed, "bad": bad}).encode())
    return DecodedImages(np.memmap(data_file, dtype=np.uint8, mode="r"), offsets, shapes_arr, failed, bad)
