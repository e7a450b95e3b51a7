"""The two data paths of the engine, behind one interface:

* `cached` (default): every training image decoded once into the decoded-image cache, augmented on the training
  device in batches; validation images cut once to their exact eval crops;
* `pil`: timm's `create_transform(is_training=True)` on PIL images in a DataLoader, as timm's train.py does.

Both shard the data across processes the way DistributedSampler does when run under torchrun. `prepare_split`
decides which files a run uses (exclusions, group-aware split, data warnings; on resume: as recorded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import timm
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from vitstudio.core.data.datasets import (
    Split,
    exact_duplicate_groups,
    scan_dataset,
    split_dataset,
    upstream_split,
    without,
)
from vitstudio.core.data.device_augment import DeviceEvalBatches, DeviceTrainBatches
from vitstudio.core.data.imagecache import build_cache, short_side_for
from vitstudio.core.data.images import ImageReadError, read_image
from vitstudio.core.distributed import DistInfo
from vitstudio.core.files import counted
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import eval_transform, split_eval_transform
from vitstudio.core.train.recipes import TrainConfig


class FolderDataset(Dataset):
    """(path, label) pairs -> (tensor, label). An image that fails to decode is replaced by the next one and
    remembered in `self.failed`, so one bad file never stops a run."""

    def __init__(self, items, transform) -> None:
        self.items, self.transform = list(items), transform
        self.failed: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int):
        for offset in range(len(self.items)):
            path, label = self.items[(index + offset) % len(self.items)]
            try:
                return self.transform(read_image(path)), label
            except ImageReadError as exc:
                self.failed[str(path)] = exc.reason
        raise RuntimeError("No readable image in the dataset.")


@dataclass
class Loaders:
    train: Callable[[int], Iterable]  # epoch -> (x, y) batches already on the device
    val: Iterable  # (x, y) batches on the device (this process's share)
    steps: int  # training batches per epoch, for this process
    images: int  # training images per epoch, for this process
    failed: dict[str, str]


def make_loaders(split: Split, cfg: dict, config: TrainConfig, device: torch.device, dist_info: DistInfo,
                 generator: torch.Generator, drop_last: bool, cancel: CancelToken | None = None
                 ) -> Iterator[Progress]:
    """Generator: yields Progress while preparing, returns Loaders (`loaders = yield from make_loaders(...)`)."""
    if config.data_path == "pil":
        return _pil_loaders(split, cfg, config, device, dist_info, generator, drop_last)
    if config.color_jitter or config.auto_augment:  # photometric augmentation exists in timm's PIL transforms only
        yield Progress(0, 0, "Colour jitter / RandAugment: using timm's PIL data path")
        return _pil_loaders(split, cfg, config, device, dist_info, generator, drop_last)
    if config.data_path != "cached":
        raise ValueError(f"Unknown data path '{config.data_path}'; use cached or pil.")
    size = tuple(cfg["input_size"][1:])
    paths = [p for p, _ in split.train]
    cache = yield from build_cache(paths, short_side_for(max(size)), int(config.cache_memory_gb * (1 << 30)),
                                   cancel=cancel, device=device)  # decoded on the GPU when training on one
    train = DeviceTrainBatches(
        cache, [label for _, label in split.train], size, scale=config.scale, hflip=config.hflip,
        mean=cfg["mean"], std=cfg["std"], interpolation=cfg["interpolation"], batch_size=config.batch_size,
        device=device, seed=config.seed, drop_last=drop_last, rank=dist_info.rank, world=dist_info.world)
    pil_steps, _ = split_eval_transform(eval_transform(cfg))
    crops, labels, failed = [], [], dict(cache.failed)
    for n, (path, label) in enumerate(split.val, 1):
        try:
            crop = read_image(path)
            for step in pil_steps:
                crop = step(crop)
            crops.append(np.asarray(crop, dtype=np.uint8))
            labels.append(label)
        except ImageReadError as exc:
            failed[str(path)] = exc.reason
        if n % 32 == 0 or n == len(split.val):
            yield Progress(n, len(split.val), "Preparing validation crops")
    val = DeviceEvalBatches(np.stack(crops), labels, cfg["mean"], cfg["std"], config.batch_size, device,
                            dist_info.rank, dist_info.world)
    return Loaders(train.epoch, val, len(train), len(train.valid) // dist_info.world, failed)


def train_transform(cfg: dict, config: TrainConfig, mean=None, std=None):
    """timm's training transform with the run's augmentation (crop scale, flip, colour jitter, RandAugment)."""
    return timm.data.create_transform(
        cfg["input_size"], is_training=True, scale=tuple(config.scale), hflip=config.hflip,
        color_jitter=config.color_jitter or None, auto_augment=config.auto_augment or None,
        interpolation=cfg["interpolation"], mean=cfg["mean"] if mean is None else mean,
        std=cfg["std"] if std is None else std)


def preview_augmentation(paths: list, config: TrainConfig, input_size: tuple[int, int], count: int = 16,
                         interpolation: str = "bicubic", crop_pct: float | None = None) -> list[np.ndarray]:
    """`count` training views as the run will see them (uint8 RGB), from the given files, seeded by the config. The
    features data path (the quick preset) augments nothing: its views are each image's eval crop (`crop_pct`: the
    model's), whose features the head is fitted on."""
    import random

    cfg = {"input_size": (3, *input_size), "interpolation": interpolation}
    if config.data_path == "features":
        pil_steps, _ = split_eval_transform(eval_transform({**cfg, "crop_pct": crop_pct}))

        def view(image):
            for step in pil_steps:
                image = step(image)
            return np.asarray(image.convert("RGB"), dtype=np.uint8)
    else:
        transform = train_transform(cfg, config, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))  # stays in [0, 1]

        def view(image):
            return (transform(image).clamp(0, 1).permute(1, 2, 0).numpy() * 255 + 0.5).astype(np.uint8)
    rng = random.Random(config.seed)
    saved = random.getstate()
    views = []
    with torch.random.fork_rng(devices=[]):  # timm's transforms draw from the global RNGs: seed them, then restore
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        try:
            for path in (rng.choice(paths) for _ in range(count)):
                try:
                    views.append(view(read_image(path)))
                except ImageReadError:
                    continue
        finally:
            random.setstate(saved)
    return views


def _pil_loaders(split, cfg, config, device, dist_info, generator, drop_last) -> Loaders:
    train_tf = train_transform(cfg, config)
    val_tf = eval_transform(cfg)
    train_set, val_set = FolderDataset(split.train, train_tf), FolderDataset(split.val, val_tf)
    val_set.failed = train_set.failed  # one record: a file that fails in validation is reported too
    args = dict(num_workers=config.workers, persistent_workers=config.workers > 0,
                pin_memory=device.type == "cuda")
    sampler = DistributedSampler(train_set, dist_info.world, dist_info.rank, seed=config.seed) \
        if dist_info.enabled else None
    val_sampler = DistributedSampler(val_set, dist_info.world, dist_info.rank, shuffle=False) \
        if dist_info.enabled else None
    train_loader = DataLoader(train_set, batch_size=config.batch_size, shuffle=sampler is None, sampler=sampler,
                              generator=generator, drop_last=drop_last and len(train_set) >= config.batch_size,
                              **args)
    val_loader = DataLoader(val_set, batch_size=config.batch_size, sampler=val_sampler, **args)

    def on_device(loader):
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    def epoch(e: int):
        if sampler is not None:
            sampler.set_epoch(e)
        return on_device(train_loader)

    return Loaders(epoch, _Reiterable(lambda: on_device(val_loader)), len(train_loader),
                   len(train_set) // dist_info.world, train_set.failed)


class _Reiterable:
    def __init__(self, make) -> None:
        self.make = make

    def __iter__(self):
        return self.make()


def _recorded_split(config: TrainConfig, out: Path) -> tuple[Split, dict[str, str], dict[str, str], list[str]]:
    """split.json and what status.json recorded about the data, each checked: a RunFileError names a damaged one."""
    from vitstudio.core.train.runs import RunFileError, one_line, read_json_object

    manifest = out / "split.json"
    try:
        split = Split.from_manifest(read_json_object(manifest), config.data_dir)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, RunFileError):
            raise
        raise RunFileError(f"{manifest} is damaged: {type(exc).__name__} {one_line(exc, 120)}") from None
    status = out / "status.json"
    recorded = read_json_object(status) if status.exists() else {}
    skipped, ignored = recorded.get("skipped", {}), recorded.get("ignored", {})
    warnings = recorded.get("warnings", [])
    if not isinstance(skipped, dict) or not isinstance(ignored, dict) or not isinstance(warnings, list):
        raise RunFileError(f"{status} is damaged: 'skipped' and 'ignored' should be objects and 'warnings' a list")
    return split, skipped, ignored, [w for w in warnings if "chance" not in str(w)]


def prepare_split(config: TrainConfig, out: Path) -> tuple[Split, dict[str, str], dict[str, str], list[str]]:
    """The split, the files the scan left out that were meant to be used (path -> why: a labels file's rows, an
    unreadable image), those a folder walk met that are no image to use (notes.txt: counted, no failure) and
    warnings about the data, which the run records (on resume: as recorded)."""
    manifest = out / "split.json"
    if manifest.exists():  # resume: exactly the same files on any machine
        return _recorded_split(config, out)
    scan = without(scan_dataset(config.data_dir), config.exclude)
    warning = scan.imbalance_warning()
    warnings = [warning] if warning and not config.balance else []
    if config.split_rule == "upstream":
        return upstream_split(scan, config.val_ratio), dict(scan.failed), dict(scan.ignored), warnings
    groups = exact_duplicate_groups(scan) if scan.val is None else None
    split = split_dataset(scan, config.val_ratio, config.seed, groups)
    if groups:  # copies are kept on one side, so validation never scores an image the model trained on
        copies = len(set(groups.values()))
        kept = ("each group was kept on one side of the train/val split" if not split.meta.get("groups") else
                "they are everywhere, so no split can keep them apart: validation scores copies of training images")
        warnings.append(f"{len(groups)} files are exact copies of each other ({counted(copies, 'group')}); "
                        f"{kept}. `vitstudio audit` also finds near-duplicates.")
    return split, dict(scan.failed), dict(scan.ignored), warnings
