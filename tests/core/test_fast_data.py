"""The fast data path: decoded-image cache, device-side augmentation equivalent to timm's PIL path, exact eval
crops, sharding, and multi-process training through torchrun (gloo, CPU)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from tests.conftest import TINY_SPEC
from tests.core.generators import drain
from tests.core.synthetic_data import make_dataset, tree_state
from vitstudio.core.data.device_augment import DeviceEvalBatches, DeviceTrainBatches, shard_indices
from vitstudio.core.data.imagecache import build_cache, short_side_for
from vitstudio.core.data.images import read_image

SPEC3 = TINY_SPEC.replace("classes=5", "classes=3")


@pytest.fixture
def jpegs(tmp_path, photos):
    """Real photos as JPEGs of different sizes and aspect ratios, plus one broken file."""
    folder = tmp_path / "jpegs"
    folder.mkdir()
    paths = []
    for i, (name, path) in enumerate(photos.items()):
        img = read_image(path).resize((300 + 40 * i, 200 + 30 * i))
        out = folder / f"{name}.jpg"
        img.save(out, quality=92)
        paths.append(out)
    broken = folder / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff\xe0 not really")
    return paths + [broken]


def test_cache_in_memory_spilled_and_reused(jpegs, tmp_path):
    """Cache records the broken file, short side resized; in-memory vs spilled memmap identical; reused when unchanged,
    rebuilt after an mtime change; the source folder is not written.
    """
    before = tree_state(jpegs[0].parent)
    mem = drain(build_cache(jpegs, 64, folder=tmp_path / "cache"))
    assert list(mem.failed) == [str(jpegs[-1])] and mem.bad == [len(jpegs) - 1]
    first = read_image(jpegs[0])
    assert min(mem.image(0).shape[:2]) == 64 and mem.image(0).shape[1] == round(first.width * 64 / first.height)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())  # fitted in memory
    spilled = drain(build_cache(jpegs, 64, memory_budget=10_000, folder=tmp_path / "cache"))
    assert isinstance(spilled.data, np.memmap) and len(list((tmp_path / "cache").glob("*.u8"))) == 1
    for k in range(len(jpegs)):
        np.testing.assert_array_equal(mem.image(k), spilled.image(k))
    reused_progress = list(build_cache(jpegs, 64, memory_budget=10_000, folder=tmp_path / "cache"))
    assert reused_progress[0].message == "Decoded-image cache found"
    os.utime(jpegs[1], ns=(1, 1))  # an edited file gets a new cache
    assert list(build_cache(jpegs, 64, memory_budget=10_000, folder=tmp_path / "cache"))[0].message != \
        "Decoded-image cache found"
    os.utime(jpegs[1])
    assert tree_state(jpegs[0].parent) == {**before, "chelsea.jpg": tree_state(jpegs[0].parent)["chelsea.jpg"]}


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "per-image"])
def test_device_augmentation_matches_timm_pil_distribution(jpegs, batched):
    """Per-sample statistics of 300 augmented views: device path vs timm's create_transform(is_training=True).

    300 augmented views: per-sample mean/std/centre-x distributions pass a KS test against timm's
    `create_transform(is_training=True)`; reference: timm PIL path. [parametrised ×2]
    """
    from scipy.stats import ks_2samp

    cache = drain(build_cache(jpegs[:1], short_side_for(48)))
    mean, std = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)
    batches = DeviceTrainBatches(cache, [0], (48, 48), scale=(0.08, 1.0), hflip=0.5, mean=mean, std=std,
                                 interpolation="bicubic", batch_size=1, batched=batched)
    ours = torch.cat([x for e in range(300) for x, _ in batches.epoch(e)])
    pil_tf = timm.data.create_transform((3, 48, 48), is_training=True, scale=(0.08, 1.0), hflip=0.5,
                                        color_jitter=0.0, interpolation="bicubic", mean=mean, std=std)
    image = read_image(jpegs[0])
    ref = torch.stack([pil_tf(image) for _ in range(300)])
    assert ours.shape == ref.shape

    def stats(batch):
        gray = batch.mean(1)  # (N, H, W)
        cols = torch.arange(gray.shape[-1], dtype=torch.float32)
        weight = gray - gray.amin(dim=(1, 2), keepdim=True) + 1e-3
        centre_x = (weight.sum(1) * cols).sum(-1) / weight.sum(dim=(1, 2))  # moves with crop position and flip
        return {"mean": gray.mean(dim=(1, 2)), "std": gray.std(dim=(1, 2)), "centre_x": centre_x}

    a, b = stats(ours), stats(ref)
    for key in a:
        assert ks_2samp(a[key].numpy(), b[key].numpy()).pvalue > 0.001, key


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "per-image"])
def test_whole_image_crop_is_close_to_pil(jpegs, batched):
    """With no randomness left (full crop, no flip) the device path reproduces timm's PIL pixels closely.

    [parametrised ×2]
    """
    cache = drain(build_cache(jpegs[:1], short_side_for(64)))
    batches = DeviceTrainBatches(cache, [0], (64, 64), scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=0.0,
                                 mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bilinear", batch_size=1,
                                 batched=batched)
    ours = next(batches.epoch(0))[0][0]
    pil_tf = timm.data.create_transform((3, 64, 64), is_training=True, scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=0.0,
                                        color_jitter=0.0, interpolation="bilinear", mean=(0.5,) * 3, std=(0.5,) * 3)
    ref = pil_tf(read_image(jpegs[0]))
    assert (ours - ref).abs().mean() < 0.03  # normalised units: ~1 % of the range, from resampling twice


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_batched_resize_equals_the_per_image_path(jpegs, mode):
    """The batched path (two matrix products for the whole batch) against the per-image F.interpolate(antialias)
    reference on the same random plan: crops of every size and aspect, flips, images of different sizes padded
    into one batch — equal up to float rounding (at most one uint8 level, a few pixels).

    [parametrised ×2]
    """
    import random

    cache = drain(build_cache(jpegs, short_side_for(40)))
    kwargs = dict(scale=(0.05, 1.0), ratio=(0.5, 2.0), hflip=0.5, interpolation=mode, batch_size=4)
    batched = DeviceTrainBatches(cache, [0, 1, 2, 3, 0], (40, 40), batched=True, **kwargs)
    single = DeviceTrainBatches(cache, [0, 1, 2, 3, 0], (40, 40), batched=False, **kwargs)
    level = 1 / 255 / 0.224  # one uint8 level in normalised units (the smallest ImageNet std)
    for epoch in range(5):
        random.seed(epoch)
        a = list(batched.epoch(epoch, prefetch=0))
        random.seed(epoch)
        b = list(single.epoch(epoch, prefetch=0))
        for (xa, ya), (xb, yb) in zip(a, b, strict=True):
            assert ya.tolist() == yb.tolist()
            diff = (xa - xb).abs()
            assert diff.max() <= level * 1.01 and (diff > 0).float().mean() < 0.01


def _pil_coefficients(length: int, out: int, mode: str) -> np.ndarray:
    """(out, length): Pillow's precompute_coeffs (Resample.c) written out loop by loop — the filter's support
    stretched by the downscale factor, taps from int(centre ± support + 0.5) clipped to the input, normalised."""
    def bicubic(x, a=-0.5):
        x = abs(x)
        if x < 1:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return (((x - 5) * x + 8) * x - 4) * a if x < 2 else 0.0

    def triangle(x):
        return max(0.0, 1.0 - abs(x))

    filt, support = (triangle, 1.0) if mode == "bilinear" else (bicubic, 2.0)
    scale = length / out
    filterscale = max(scale, 1.0)
    support *= filterscale
    k = np.zeros((out, length))
    for xx in range(out):
        centre = (xx + 0.5) * scale
        xmin = max(int(centre - support + 0.5), 0)
        xmax = min(int(centre + support + 0.5), length)
        taps = [filt((x - centre + 0.5) / filterscale) for x in range(xmin, xmax)]
        k[xx, xmin:xmax] = np.array(taps) / sum(taps)
    return k


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_batch_resample_weights_are_pillows_coefficients(mode):
    """The weights of a whole batch of crops (computed at once, on the device) against Pillow's per-crop
    coefficients placed at each crop's offset: downscales, upscales, a one-pixel crop, a crop to the edge.

    [parametrised ×2]
    """
    from vitstudio.core.data.device_augment import batch_resample_weights

    rng = np.random.default_rng(0)
    size, out = 90, 24
    starts = rng.integers(0, 60, 40)
    lengths = np.array([rng.integers(1, size - s + 1) for s in starts])
    starts[:3], lengths[:3] = (0, 5, 89), (size, 1, 1)
    got = batch_resample_weights(torch.tensor(starts), torch.tensor(lengths), out, size, mode, torch.device("cpu"))
    assert got.shape == (40, out, size) and got.dtype == torch.float32
    for n, (start, length) in enumerate(zip(starts, lengths)):
        expected = np.zeros((out, size))
        expected[:, start:start + length] = _pil_coefficients(int(length), out, mode)
        np.testing.assert_allclose(got[n].numpy(), expected, atol=1e-6)


def test_eval_crops_are_exact(jpegs):
    """DeviceEvalBatches of PIL-cropped images equal timm's eval transform output (atol 1e-6)."""
    loaded_cfg = dict(input_size=(3, 40, 40), interpolation="bicubic", mean=(0.5,) * 3, std=(0.5,) * 3,
                      crop_pct=0.875, crop_mode="center")
    from vitstudio.core.models.model import split_eval_transform

    tf = timm.data.create_transform(**loaded_cfg)
    pil_steps, _ = split_eval_transform(tf)
    crops, refs = [], []
    for path in jpegs[:3]:
        img = read_image(path)
        crop = img
        for step in pil_steps:
            crop = step(crop)
        crops.append(np.asarray(crop))
        refs.append(tf(img))
    x, _ = next(iter(DeviceEvalBatches(np.stack(crops), [0, 1, 2], (0.5,) * 3, (0.5,) * 3, 8, torch.device("cpu"))))
    torch.testing.assert_close(x, torch.stack(refs), atol=1e-6, rtol=0)


def test_shards_cover_everything_once_per_epoch():
    """`shard_indices` gives equal shards covering all items (padding like DistributedSampler)."""
    items = list(range(10))
    shards = [shard_indices(items, r, 3) for r in range(3)]
    assert [len(s) for s in shards] == [4, 4, 4]
    assert sorted(set(sum(shards, []))) == items  # all covered; 2 repeated to pad, like DistributedSampler


def test_cached_and_pil_paths_learn_alike(tmp_path):
    """10-epoch scratch training on cached and PIL paths both reach ≥ 0.75 val accuracy within 0.2 of each other.
    [fine-tune]
    """
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    data = make_dataset(tmp_path / "data", per_class=30)
    accs = {}
    for path in ("cached", "pil"):
        cfg = make_config(str(data), SPEC3, str(tmp_path / path), preset="scratch", epochs=10, batch_size=16,
                          lr=2e-3, warmup_epochs=1, seed=3, data_path=path)
        accs[path] = drain(fine_tune(cfg)).best_val_acc
    assert min(accs.values()) >= 0.75 and abs(accs["cached"] - accs["pil"]) <= 0.2, accs


def _ranks_finetune(forked_cli, data, out, *options: str) -> list:
    """`torchrun --nproc-per-node 2 -m vitstudio finetune …` on the CPU (gloo), one thread per process: the two ranks
    forked from the warm server with torchrun's environment (the launcher itself, fresh interpreters and all, is run
    by test_gui_launcher_runs_torchrun_and_follows_the_run, as the Training panel runs it)."""
    ranks = forked_cli.run_ranks(["finetune", str(data), "--model", SPEC3, "--preset", "scratch", *options,
                                  "--out", str(out), "--quiet"], 2, {**os.environ, "OMP_NUM_THREADS": "1"})
    assert [r.returncode for r in ranks] == [0, 0], [r.stderr[-3000:] for r in ranks]
    return ranks


def test_torchrun_two_processes_on_gloo(tmp_path, forked_cli):
    """`torchrun --nproc-per-node 2 vitstudio finetune` finishes with processes=2, metrics written once, only rank 0
    reports, run loads. Two ranks forked from the warm server with torchrun's environment (`ForkedCli.run_ranks`); the
    launcher itself is run by the next test. [subprocess: forked warm]
    """
    data = make_dataset(tmp_path / "data", per_class=12)
    out = tmp_path / "ddp-run"
    ranks = _ranks_finetune(forked_cli, data, out, "--epochs", "3", "--batch-size", "8")
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "finished" and status["processes"] == 2
    assert (out / "metrics.csv").read_text().count("\n") == 4  # written once, by rank 0
    reports = [r.stdout.count("finished: best val accuracy") for r in ranks]
    assert reports == [1, 0]  # only rank 0 reports
    from vitstudio.core.models.loading import load_model

    assert load_model(str(out)).labels == ["blue", "green", "red"]
    assert Image.open(next(data.rglob("*.png"))).size == (32, 32)


def test_gui_launcher_runs_torchrun_and_follows_the_run(tmp_path):
    """What the Training panel does with more than one GPU, exercised here with 2 CPU processes on gloo.

    `torchrun_command` shape; `run_torchrun` with 2 processes yields epoch metrics 0,1 and a finished result with
    report. [torchrun]
    """
    from vitstudio.core.train.engine import EpochMetrics
    from vitstudio.core.train.launcher import run_torchrun, torchrun_command
    from vitstudio.core.train.recipes import make_config

    cmd = torchrun_command(tmp_path / "c.json", 4)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--standalone"] and "--nproc-per-node" in cmd
    data = make_dataset(tmp_path / "data", per_class=12)
    config = make_config(str(data), SPEC3, str(tmp_path / "launched"), preset="scratch", epochs=2, batch_size=8)
    records = []
    gen = run_torchrun(config, 2, poll_s=0.2)
    try:
        while True:
            records.append(next(gen))
    except StopIteration as stop:
        result = stop.value
    assert result.status == "finished" and result.report is not None
    assert [r.epoch for r in records if isinstance(r, EpochMetrics)] == [0, 1]
    assert json.loads((tmp_path / "launched" / "status.json").read_text())["processes"] == 2


def test_prefetching_changes_nothing_but_speed(jpegs):
    """prefetch=2 batches equal prefetch=0 exactly; broken file never sampled; an early-stopped epoch leaves no thread.
    """
    import random
    import threading

    cache = drain(build_cache(jpegs, short_side_for(32)))
    batches = DeviceTrainBatches(cache, [0, 1, 2, 3, 0], (32, 32), batch_size=2)
    assert len(batches) == 2  # the broken file is never sampled
    random.seed(7)
    plain = list(batches.epoch(0, prefetch=0))
    random.seed(7)
    ahead = list(batches.epoch(0, prefetch=2))
    for (xa, ya), (xb, yb) in zip(plain, ahead, strict=True):
        torch.testing.assert_close(xa, xb, atol=0, rtol=0)
        assert ya.tolist() == yb.tolist()
    before = threading.active_count()
    for _ in batches.epoch(1):  # a consumer that stops early (a cancelled run) leaves no thread behind
        break
    assert threading.active_count() == before


def test_torchrun_with_gradient_accumulation_and_pil_path(tmp_path, forked_cli):
    """Two ranks with `--grad-accum 2 --data-path pil` record 2 processes, pil path, 2 epochs. [subprocess: forked warm]
    """
    data = make_dataset(tmp_path / "data", per_class=8)
    out = tmp_path / "ddp-accum"
    _ranks_finetune(forked_cli, data, out, "--epochs", "2", "--batch-size", "4", "--grad-accum", "2",
                    "--data-path", "pil")
    status = json.loads((out / "status.json").read_text())
    assert status["processes"] == 2 and status["data_path"] == "pil" and status["epochs_done"] == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_augmentation_matches_the_cpu_path(jpegs):
    """On a GPU (cache held on the device, batched resize — the defaults there) the same plan gives the batches the
    CPU's per-image path gives, within one uint8 level.

    [CUDA only]
    """
    import random

    cache = drain(build_cache(jpegs, short_side_for(40)))
    kwargs = dict(scale=(0.05, 1.0), ratio=(0.5, 2.0), hflip=0.5, interpolation="bicubic", batch_size=4)
    gpu = DeviceTrainBatches(cache, [0, 1, 2, 3, 0], (40, 40), device=torch.device("cuda"), **kwargs)
    cpu = DeviceTrainBatches(cache, [0, 1, 2, 3, 0], (40, 40), batched=False, **kwargs)
    assert gpu.batched and gpu.flat.is_cuda
    level = 1 / 255 / 0.224
    for epoch in range(3):
        random.seed(epoch)
        a = list(gpu.epoch(epoch))  # with the prefetching thread, as in training
        random.seed(epoch)
        b = list(cpu.epoch(epoch, prefetch=0))
        for (xa, ya), (xb, yb) in zip(a, b, strict=True):
            assert ya.is_cuda and ya.cpu().tolist() == yb.tolist()
            diff = (xa.cpu() - xb).abs()
            assert diff.max() <= level * 1.01 and (diff > 0).float().mean() < 0.01
