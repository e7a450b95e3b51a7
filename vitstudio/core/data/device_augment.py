"""Training batches from the decoded-image cache, augmented on the training device.

Random resized crop parameters come from timm's own `RandomResizedCropAndInterpolation.get_params` (the same
distribution as the plain PIL path), the crop is cut from the cached uint8 image, resized on the device
(antialiased, rounded to uint8 levels like PIL), flipped and normalised there, a whole batch at a time.

Two resize paths. The batched one (default on CUDA) pads the batch's images into one tensor and resizes every crop of
the batch with two batched matrix products, out = Wy · image · Wxᵀ, where Wy and Wx hold the antialiased
resampling weights of each crop (PIL's and torch's formula: the filter stretched by the downscale factor,
renormalised at the edges) placed at the crop's rows and columns; then it rounds, flips and normalises the batch
in three element-wise ops. The per-image path (`F.interpolate(antialias=True)`, one call per crop) is the same
arithmetic one crop at a time, and the reference the tests compare it with. (An area filter through
`torchvision.ops.roi_align` was tried first: one call, but blurrier than PIL's kernel — the augmentation-statistics
test rejected its sharpness and contrast.)
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from timm.data.transforms import RandomResizedCropAndInterpolation

from vitstudio.core.data.imagecache import DecodedImages
from vitstudio.core.jobs import prefetched
from vitstudio.core.models.devices import to_device

MODES = {"bilinear": "bilinear", "bicubic": "bicubic", "nearest": "nearest", "random": "bilinear"}


def batch_resample_weights(starts: torch.Tensor, lengths: torch.Tensor, out: int, size: int, mode: str,
                           device: torch.device) -> torch.Tensor:
    """(B, out, size) float32: row n holds the weights of an antialiased resize of crop n (`lengths[n]` samples
    from `starts[n]`) to `out` samples — torch's `_upsample_*_aa` and PIL's ImagingResample: the filter stretched
    by the downscale factor, renormalised at the edges — and zeros elsewhere. Every crop of a batch at once, on
    `device`, in float64 (per crop in numpy this cost ~0.7 ms each: more than a large GPU's training step)."""
    starts = starts.to(device, torch.float64).view(-1, 1, 1)
    lengths = lengths.to(device, torch.float64).view(-1, 1, 1)
    scale = lengths / out
    stretch = scale.clamp(min=1.0)
    support = (1.0 if mode == "bilinear" else 2.0) * stretch
    centre = scale * (torch.arange(out, device=device, dtype=torch.float64).view(1, -1, 1) + 0.5)
    k = torch.arange(size, device=device, dtype=torch.float64).view(1, 1, -1) - starts  # index inside the crop
    lo = (centre - support + 0.5).floor().clamp(min=0)  # numpy's int() truncates; both clamp negatives to 0
    hi = torch.minimum((centre + support + 0.5).floor(), lengths)
    x = ((k - centre + 0.5) / stretch).abs()
    if mode == "bilinear":
        w = (1.0 - x).clamp(min=0.0)
    else:
        a = -0.5
        w = torch.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                        torch.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, torch.zeros_like(x)))
    w = torch.where((k >= lo) & (k < hi), w, torch.zeros_like(w))
    return (w / w.sum(-1, keepdim=True)).float()


def shard_indices(indices: Sequence[int], rank: int, world: int) -> list[int]:
    """DistributedSampler's split: pad by wrapping to a multiple of `world`, then every world-th from `rank`."""
    indices = list(indices)
    if world <= 1:
        return indices
    total = math.ceil(len(indices) / world) * world
    padded = indices + indices[: total - len(indices)]
    return padded[rank:total:world]


class DeviceTrainBatches:
    def __init__(self, cache: DecodedImages, labels: Sequence[int], size: tuple[int, int], *,
                 scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), hflip: float = 0.5, mean=(0.485, 0.456, 0.406),
                 std=(0.229, 0.224, 0.225), interpolation: str = "bilinear", batch_size: int = 32,
                 device: torch.device | None = None, seed: int = 0, drop_last: bool = False,
                 rank: int = 0, world: int = 1, device_budget: int = 4 << 30, batched: bool | None = None) -> None:
        self.cache, self.size = cache, tuple(size)
        self.labels = torch.as_tensor(list(labels), dtype=torch.long)
        self.scale, self.ratio, self.hflip = tuple(scale), tuple(ratio), hflip
        self.mode = MODES.get(interpolation, "bilinear")
        device = device or torch.device("cpu")
        self.batch_size, self.device, self.seed, self.drop_last = batch_size, device, seed, drop_last
        self.rank, self.world = rank, world
        # dense matrix products win where launches are dear and FLOPs cheap (GPUs); on a CPU the sparse per-image
        # kernels are faster (measured here: 1,153 img/s per-image vs 210 batched, 64 × 224² bicubic crops)
        self.batched = device.type == "cuda" if batched is None else batched
        bad = set(cache.bad)
        self.valid = [k for k in range(len(cache)) if k not in bad]
        self.mean = torch.tensor(mean, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(std, device=device).view(1, 3, 1, 1) * 255
        flat = torch.from_numpy(np.asarray(cache.data))  # zero-copy on the host
        # on an accelerator, keep the whole cache there when it fits: crops are then slices, no copies per step
        on_device = device.type != "cpu" and cache.nbytes <= device_budget
        self.flat = flat.to(device) if on_device else flat

    def __len__(self) -> int:
        n = len(shard_indices(self.valid, self.rank, self.world))
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def _plan(self, epoch: int) -> list[list[tuple[int, int, int, int, int, bool]]]:
        """Every random choice of the epoch, drawn here on the caller's thread: the shuffled, sharded order and,
        per image, timm's crop parameters (top, left, h, w) and the flip. Seeded, so reproducible."""
        g = torch.Generator().manual_seed(self.seed + epoch)
        order = [self.valid[i] for i in torch.randperm(len(self.valid), generator=g).tolist()]
        order = shard_indices(order, self.rank, self.world)
        plan = []
        for start in range(0, len(order), self.batch_size):
            idx = order[start: start + self.batch_size]
            if self.drop_last and len(idx) < self.batch_size:
                break
            batch = []
            for k in idx:
                h, w, c = (int(v) for v in self.cache.shapes[k])
                top, left, ch, cw = RandomResizedCropAndInterpolation.get_params(
                    torch.empty((c, h, w), device="meta"), self.scale, self.ratio)
                batch.append((k, top, left, ch, cw, random.random() < self.hflip))
            plan.append(batch)
        return plan

    def _crop(self, k: int, top: int, left: int, ch: int, cw: int, flip: bool) -> torch.Tensor:
        crop = self._image(k)[top: top + ch, left: left + cw].to(self.device, non_blocking=True)
        crop = crop.permute(2, 0, 1)[None].float()
        antialias = self.mode in ("bilinear", "bicubic")
        out = F.interpolate(crop, size=self.size, mode=self.mode, antialias=antialias,
                            align_corners=False if antialias else None)
        out = out.round_().clamp_(0, 255)  # the uint8 levels a PIL resize would give
        return out[0].flip(-1) if flip else out[0]

    def _image(self, k: int) -> torch.Tensor:
        h, w, c = (int(v) for v in self.cache.shapes[k])
        return self.flat[int(self.cache.offsets[k]): int(self.cache.offsets[k]) + h * w * c].view(h, w, c)

    def _resize_batched(self, batch) -> torch.Tensor:
        """Every crop of the batch resized by two batched matrix products over the batch's images, padded to one
        size; each crop's weights sit at its rows and columns (zero elsewhere, padding included)."""
        canvas = self._canvas([self._image(item[0]) for item in batch])
        height, width = canvas.shape[-2:]
        # small per-batch tables go through pinned memory too: a copy from pageable memory blocks this producer
        # thread until the GPU has caught up with the stream
        boxes = to_device(torch.tensor([item[1:5] for item in batch]), self.device)  # top, left, h, w
        wy = batch_resample_weights(boxes[:, 0], boxes[:, 2], self.size[0], height, self.mode, self.device)
        wx = batch_resample_weights(boxes[:, 1], boxes[:, 3], self.size[1], width, self.mode, self.device)
        out = torch.einsum("bih,bchw,bjw->bcij", wy, canvas, wx)
        out = out.round_().clamp_(0, 255)  # the uint8 levels a PIL resize would give
        flips = to_device(torch.tensor([item[5] for item in batch]), self.device).view(-1, 1, 1, 1)
        return torch.where(flips, out.flip(-1), out)

    def _canvas(self, images: list[torch.Tensor]) -> torch.Tensor:
        """The batch's (H, W, 3) uint8 images padded to one size, as (B, 3, H, W) float on the device. A cache
        held on the host is copied once per batch, as uint8 (a quarter of float's bytes) from pinned memory
        without blocking; a cache held on the device is copied there."""
        height, width = max(i.shape[0] for i in images), max(i.shape[1] for i in images)
        on_host = self.flat.device.type == "cpu"
        canvas = torch.zeros((len(images), height, width, 3), dtype=torch.uint8,
                             device="cpu" if on_host else self.device,
                             pin_memory=on_host and self.device.type == "cuda")
        for n, img in enumerate(images):
            canvas[n, :img.shape[0], :img.shape[1]] = img
        return canvas.to(self.device, non_blocking=True).permute(0, 3, 1, 2).float()

    def _make(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        if self.batched and self.mode != "nearest":
            x = self._resize_batched(batch)
        else:
            x = torch.stack([self._crop(*item) for item in batch])
        y = self.labels[[item[0] for item in batch]]
        return (x - self.mean) / self.std, to_device(y, self.device)

    def epoch(self, epoch: int, prefetch: int = 2) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(x (B, 3, H, W) normalised on the device, y (B,)) batches for one epoch, shuffled per epoch.

        A background thread cuts and resizes the next batches while the model trains on the current one (torch
        releases the GIL in its kernels), so augmentation overlaps compute; all randomness is drawn up front.
        """
        plan = self._plan(epoch)
        batches = (self._make(batch) for batch in plan)
        if prefetch <= 0:
            yield from batches
            return
        yield from prefetched(batches, prefetch, name="vitstudio-augment")


class DeviceEvalBatches:
    """Validation batches from exact eval crops (the PIL stages of timm's eval transform, computed once)."""

    def __init__(self, crops: np.ndarray, labels: Sequence[int], mean, std, batch_size: int,
                 device: torch.device, rank: int = 0, world: int = 1) -> None:
        self.crops = torch.from_numpy(crops)  # (N, H, W, 3) uint8
        self.labels = torch.as_tensor(list(labels), dtype=torch.long)
        self.order = list(range(len(crops)))[rank::world]  # no padding: each image is scored once overall
        self.mean = torch.tensor(mean, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(std, device=device).view(1, 3, 1, 1) * 255
        self.batch_size, self.device = batch_size, device

    def __iter__(self):
        for start in range(0, len(self.order), self.batch_size):
            idx = self.order[start: start + self.batch_size]
            x = to_device(self.crops[idx], self.device).permute(0, 3, 1, 2).float()
            yield (x - self.mean) / self.std, to_device(self.labels[idx], self.device)
