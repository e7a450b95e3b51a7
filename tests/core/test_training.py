"""The fine-tuning engine: it learns, cancels fast, resumes, survives interrupted writes, never touches the
dataset, and its output folder loads in plain timm."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import timm
import torch

from tests.conftest import TINY_SPEC
from tests.core.generators import run
from tests.core.synthetic_data import make_dataset, tree_state
from vitstudio.core.files import atomic_torch_save
from vitstudio.core.jobs import CancelToken
from vitstudio.core.train.engine import EpochMetrics, ProbeSnapshot, StepProgress, fine_tune
from vitstudio.core.train.recipes import make_config
from vitstudio.core.train.runs import CHECKPOINT

SPEC3 = TINY_SPEC.replace("classes=5", "classes=3")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = make_dataset(tmp_path_factory.mktemp("data") / "colours", per_class=30)
    (root / "red" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    (root / "green" / "readme.txt").write_text("not an image")
    return root


def _config(data, out, **kw):
    args = dict(preset="scratch", epochs=12, batch_size=16, warmup_epochs=1, lr=2e-3)
    args.update(kw)
    return make_config(str(data), SPEC3, str(out), **args)


def test_engine_learns_and_writes_a_complete_run(data, tmp_path):
    """12-epoch scratch run reaches ≥ 0.75 val acc; dataset untouched; all run files, metrics rows, tensorboard,
    class_indices; eval report; the broken image recorded as skipped and the readme.txt as ignored, with reasons; probe
    snapshots replay; plain timm loads with label names and equal logits; no overwrite. [fine-tune]
    """
    before = tree_state(data)
    result, records = run(fine_tune(_config(data, tmp_path / "run")))
    assert tree_state(data) == before  # nothing written under the dataset root
    epochs = [r for r in records if isinstance(r, EpochMetrics)]
    assert len(epochs) == 12 and result.status == "finished"
    assert result.best_val_acc >= 0.75  # 3 classes: chance is 0.33
    assert any(isinstance(r, StepProgress) for r in records)
    assert [r for r in records if isinstance(r, ProbeSnapshot)][-1].rollout.shape == (4, 4)
    out = tmp_path / "run"
    for name in ("config.json", "model.safetensors", "class_indices.json", "metrics.csv", "split.json",
                 "train_config.json", "eval.json", CHECKPOINT, "status.json"):
        assert (out / name).is_file(), name
    assert json.loads((out / "class_indices.json").read_text()) == {"0": "blue", "1": "green", "2": "red"}
    assert (out / "metrics.csv").read_text().count("\n") == 13
    assert any((out / "tensorboard").iterdir())
    report = result.report
    assert report.accuracy == pytest.approx(result.best_val_acc)
    assert report.confusion.sum() == 18  # 20 % of 30 readable per class (the broken file is skipped at scan)
    status = json.loads((out / "status.json").read_text())  # and recorded, with the reason
    assert set(status["skipped"]) == {str(data / "red" / "broken.png")}  # an image it could not read
    assert set(status["ignored"]) == {str(data / "green" / "readme.txt")}  # no image: counted, no failure
    assert result.skipped == status["skipped"] and result.ignored == status["ignored"]
    from vitstudio.core.train.probe import read_snapshots

    replay = read_snapshots(out)  # attention over training, kept in the run folder
    live = [r for r in records if isinstance(r, ProbeSnapshot)]
    assert [s.epoch for s in replay] == [s.epoch for s in live] == list(range(12))
    np.testing.assert_allclose(replay[-1].rollout, live[-1].rollout, rtol=1e-6)
    np.testing.assert_array_equal(replay[0].crop, live[0].crop)
    # the folder is a plain timm hub folder: timm alone loads it and predicts what our loader predicts
    plain = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    assert plain.pretrained_cfg["label_names"] == ["blue", "green", "red"]
    from vitstudio.core.inference import forward_logits
    from vitstudio.core.models.loading import load_model

    ours = load_model(str(out))
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(ours, x), plain(x), atol=1e-5, rtol=0)
    with pytest.raises(FileExistsError, match="never overwritten"):
        run(fine_tune(_config(data, out)))


def test_cancel_is_fast_and_resume_continues(data, tmp_path):
    """A cancel from another thread ends the run within 2 s; resume continues at the next epoch to the last (15) with
    each epoch logged once. [fine-tune]
    """
    out = tmp_path / "run"
    cancel = CancelToken()
    cancelled_at = []

    def cancel_after_epoch_1(record):
        if isinstance(record, EpochMetrics) and record.epoch == 1:
            cancelled_at.append(time.monotonic())
            threading.Timer(0.05, cancel.cancel).start()  # from another thread, mid-epoch

    # 16 epochs: the 14 after the cancel's (~1 s) leave it time to land; the 40 this ran were ~38 epochs of resume
    result, _ = run(fine_tune(_config(data, out, epochs=16, batch_size=4), cancel), cancel_after_epoch_1)
    assert result.status == "cancelled"
    assert time.monotonic() - cancelled_at[0] < 2.0
    state = torch.load(out / CHECKPOINT, weights_only=True)
    done = state["epoch"]
    assert done >= 1
    resumed, records = run(fine_tune(_config(data, out, epochs=16, batch_size=4), resume=True))
    resumed_epochs = [r.epoch for r in records if isinstance(r, EpochMetrics)]
    assert resumed_epochs[0] == done + 1 and resumed_epochs[-1] == 15
    assert resumed.status == "finished"
    assert (out / "metrics.csv").read_text().count("\n") == 17  # header + every epoch exactly once


def test_pause_and_resume(data, tmp_path):
    """While paused the generator blocks; after resume it continues and finishes. [fine-tune]"""
    cancel = CancelToken()
    gen = fine_tune(_config(data, tmp_path / "run", epochs=3, batch_size=4), cancel)
    while not isinstance(next(gen), StepProgress):
        pass
    cancel.pause()
    paused = threading.Thread(target=lambda: next(gen))
    paused.start()
    paused.join(0.5)
    assert paused.is_alive()  # waiting while paused
    cancel.resume()
    paused.join(10)
    assert not paused.is_alive()
    result, _ = run(gen)
    assert result.status == "finished"


def test_interrupted_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    """An interrupt before rename leaves the previous checkpoint and no temp file."""
    path = tmp_path / CHECKPOINT
    atomic_torch_save({"epoch": 1, "w": torch.ones(3)}, path)

    def die(fd):  # the process is killed after the bytes went out, before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr("vitstudio.core.files.os.fsync", die)
    with pytest.raises(KeyboardInterrupt):
        atomic_torch_save({"epoch": 2, "w": torch.zeros(3)}, path)
    assert torch.load(path, weights_only=True)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT]  # no temporary file left behind


def test_presets_freeze_what_they_say(data, tmp_path):
    """Linear-probe trains only head; last-blocks head, norm, last two blocks; full everything."""
    from vitstudio.core.train.model_prep import freeze as _freeze

    model = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=4, num_heads=2, num_classes=3)
    for preset, expected in (("linear-probe", {"head"}), ("last-blocks", {"head", "norm", "blocks.2", "blocks.3"}),
                             ("full", None)):
        cfg = make_config(str(data), SPEC3, str(tmp_path / preset), preset=preset)
        _freeze(model, cfg)
        trainable = {n.rsplit(".", 1)[0].replace(".weight", "") for n, p in model.named_parameters() if p.requires_grad}
        prefixes = {".".join(n.split(".")[:2]) if n.startswith("blocks") else n.split(".")[0] for n in trainable}
        if expected is None:
            assert all(p.requires_grad for p in model.parameters())
        else:
            assert prefixes == expected, preset


def test_seed_preset_matches_the_recipe(tmp_path):
    """The preset's optimizer is upstream's `optim.SGD(pg, lr, momentum=0.9, weight_decay=5E-5)` (no Nesterov):
    three steps on the same gradients give the same parameters and momentum buffers.

    Seed preset hyper-parameters; its optimizer is plain SGD (no Nesterov) and 3 steps equal upstream's `optim.SGD(pg,
    lr, momentum=0.9, weight_decay=5E-5)` in parameters and momentum buffers; reference: upstream train.py recipe.
    """
    from tests.conftest import make_tiny_vit
    from vitstudio.core.train.model_prep import freeze as _freeze
    from vitstudio.core.train.optimizer import make_optimizer
    from vitstudio.core.train.recipes import PRESETS

    seed = PRESETS["seed"]
    assert (seed["lr"], seed["momentum"], seed["weight_decay"]) == (1e-3, 0.9, 5e-5)
    assert (seed["epochs"], seed["batch_size"], seed["min_lr_ratio"], seed["img_size"]) == (10, 8, 0.01, 224)
    assert seed["mean"] == seed["std"] == (0.5, 0.5, 0.5) and seed["step_on_epochs"]
    config = make_config(str(tmp_path), SPEC3, str(tmp_path / "out"), preset="seed")
    ours, theirs = make_tiny_vit(seed=1), make_tiny_vit(seed=1)
    _freeze(ours, config)
    for name, param in theirs.named_parameters():  # upstream: everything but head and pre_logits frozen
        param.requires_grad_("head" in name or "pre_logits" in name)
    opt = make_optimizer(ours, config, torch.device("cpu"))
    ref = torch.optim.SGD([p for p in theirs.parameters() if p.requires_grad], lr=1e-3, momentum=0.9,
                          weight_decay=5e-5)
    assert type(opt) is torch.optim.SGD and all(not g["nesterov"] for g in opt.param_groups)
    x = torch.randn(4, 3, 32, 32)
    y = torch.tensor([0, 1, 2, 3])
    for _ in range(3):
        for model, optimizer in ((ours, opt), (theirs, ref)):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7, msg=name)
    momentum = [opt.state[p]["momentum_buffer"] for p in ours.parameters() if p in opt.state]
    momentum_ref = [ref.state[p]["momentum_buffer"] for p in theirs.parameters() if p in ref.state]
    assert len(momentum) == len(momentum_ref) == 2  # head weight and bias
    for a, b in zip(momentum, momentum_ref):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-8)


def test_upstream_split_rule_is_read_split_data(tmp_path):
    """The upstream rule reproduces train.py's read_split_data, transcribed here from upstream utils.py.

    `upstream_split` equals upstream utils.py read_split_data transcribed in the test (random.seed(0), its extensions,
    .jpeg excluded); reference: upstream utils.py.
    """
    import os
    import random

    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.data.datasets import scan_dataset, upstream_split

    root = make_dataset(tmp_path / "flowers", per_class=13)
    for i, name in enumerate(("a.JPG", "b.jpeg", "c.PNG")):  # .jpeg is not in upstream's `supported`
        (root / "red" / name).write_bytes((root / "red" / f"{i:03d}.png").read_bytes())

    def read_split_data(root: str, val_rate: float = 0.2):
        random.seed(0)
        flower_class = sorted(c for c in os.listdir(root) if os.path.isdir(os.path.join(root, c)))
        supported = [".jpg", ".JPG", ".png", ".PNG"]
        train_images, val_images = [], []
        for cla in flower_class:
            images = sorted(os.path.join(root, cla, i) for i in os.listdir(os.path.join(root, cla))
                            if os.path.splitext(i)[-1] in supported)
            val_path = random.sample(images, k=int(len(images) * val_rate))
            for img_path in images:
                (val_images if img_path in val_path else train_images).append(img_path)
        return train_images, val_images

    train_ref, val_ref = read_split_data(str(root))
    split = upstream_split(scan_dataset(root), 0.2)
    assert [str(p) for p, _ in split.train] == train_ref and [str(p) for p, _ in split.val] == val_ref
    assert not any(str(p).endswith(".jpeg") for p, _ in split.train + split.val)
    assert split.meta == {"rule": "upstream"}


def test_seed_lr_schedule_is_the_recipe_cosine():
    """timm's cosine, stepped per epoch to lr·lrf, equals the seed's lf(x) = ((1 + cos(xπ/E)) / 2)(1 − lrf) + lrf."""
    import math

    import timm.scheduler

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    sched, _ = timm.scheduler.create_scheduler_v2(opt, sched="cosine", num_epochs=10, min_lr=1e-5, warmup_epochs=0,
                                                  step_on_epochs=True)
    for epoch in range(10):
        sched.step(epoch)
        lf = ((1 + math.cos(epoch * math.pi / 10)) / 2) * (1 - 0.01) + 0.01
        assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * lf, rel=1e-9)


def test_config_errors(data, tmp_path):
    """Output inside the dataset and unknown preset raise; an empty dataset raises DatasetError and leaves no output
    folder.
    """
    with pytest.raises(ValueError, match="inside the dataset"):
        _config(data, data / "runs" / "x").validate()
    with pytest.raises(ValueError, match="Unknown preset"):
        make_config(str(data), SPEC3, str(tmp_path / "x"), preset="magic")
    empty = tmp_path / "empty"
    empty.mkdir()
    from vitstudio.core.data.datasets import DatasetError

    with pytest.raises(DatasetError):
        run(fine_tune(make_config(str(empty), SPEC3, str(tmp_path / "y"))))
    assert not (tmp_path / "y").exists()  # a failed start leaves nothing behind


def test_attention_over_training_exports_as_gif_and_mp4(data, tmp_path):
    """GIF has one ≥ 256-px frame per epoch matching `frames` within palette error; MP4 has 3 frames; other extensions
    raise. [fine-tune]
    """
    import imageio.v3 as iio

    from vitstudio.core.train.probe import frames, read_snapshots, write_animation

    out = tmp_path / "run"
    run(fine_tune(_config(data, out, epochs=3)))
    snapshots = read_snapshots(out)
    gif = write_animation(out, tmp_path / "a.gif")
    movie = iio.imread(gif)
    assert movie.shape[0] == 3 and min(movie.shape[1:3]) >= 256  # one readable frame per epoch
    diff = np.abs(movie[1][..., :3].astype(int) - frames(snapshots)[1].astype(int))
    assert diff.mean() < 6  # the epoch-2 frame, up to GIF's 256-colour palette
    mp4 = write_animation(out, tmp_path / "a.mp4")
    assert mp4.stat().st_size > 1000 and iio.imread(mp4, index=None).shape[0] == 3
    with pytest.raises(ValueError, match="gif or .mp4"):
        write_animation(out, tmp_path / "a.avi")


def test_validate_checks_every_range_and_choice_of_the_schema(tmp_path):
    """validate() checks each setting against the range or choices its field carries, once, with a message that
    names the field and its range; every preset is within them."""
    import dataclasses
    import re

    from vitstudio.core.train.recipes import PRESETS, TrainConfig
    from vitstudio.core.train.schema import settings_of

    for preset in PRESETS:
        make_config(str(tmp_path / "d"), SPEC3, str(tmp_path / "o"), preset).validate()
    base = make_config(str(tmp_path / "d"), SPEC3, str(tmp_path / "o"))
    checked = 0
    for s in settings_of(TrainConfig):
        if s.choices is not None:
            bad, expected = "nonsense", f"{s.name}.* must be one of {re.escape(', '.join(s.choices))}, not 'nonsense'."
        elif s.range is not None:
            below = s.range.lo - (0 if s.range.lo_open else 1)  # just outside the interval
            bad = below if not s.length else (below,) * s.length
            expected = f"{s.name}.* must (be in|satisfy) .*{s.range.lo:g}"
        else:
            continue
        with pytest.raises(ValueError, match=f"^{expected}"):
            dataclasses.replace(base, **{s.name: bad}).validate()
        checked += 1
    assert checked >= 30
    with pytest.raises(ValueError, match=r"^scale \(crop scale range\) must satisfy 0 < min <= max <= 1, not "
                                         r"\(0.9, 0.2\)\.$"):
        dataclasses.replace(base, scale=(0.9, 0.2)).validate()
