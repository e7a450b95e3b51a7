"""The tensor decoding path (torchvision's decode_jpeg + timm's eval transform as tensor ops), used on GPUs: on
real photos it agrees with the exact PIL path to the decoder's and resampler's rounding (top-1 equal, logits
close: the figures are printed), files it cannot take fall back to PIL one by one and the batch goes on, and the
GPU path (skipped without CUDA) matches the CPU one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from vitstudio.core.data import tensor_decode
from vitstudio.core.inference import decoded_batches, forward_logits
from vitstudio.core.models.loading import load_model

SPEC = "custom:img=64,patch=8,width=64,depth=2,heads=2,classes=20"


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory, photos):
    folder = tmp_path_factory.mktemp("jpegs")
    out = []
    for name, path in photos.items():
        img = Image.open(path).convert("RGB")
        img.save(folder / f"{name}.jpg", quality=92)
        out.append(folder / f"{name}.jpg")
    return out


def _batches(loaded, files, decoder):
    return list(decoded_batches(loaded, [str(f) for f in files], batch_size=3, decoder=decoder))


@pytest.mark.parametrize("config", [dict(interpolation="bicubic", crop_pct=0.875, crop_mode="center"),
                                    dict(interpolation="bilinear", crop_pct=1.0, crop_mode="squash")],
                         ids=["bicubic-center", "bilinear-squash"])
def test_tensor_path_agrees_with_pil_on_real_photos(jpegs, config):
    """Tensor vs PIL batches: mean pixel difference < 1 uint8 level, top-1 equal, logits within 5 % of range
    (bicubic-center, bilinear-squash); reference: the PIL path. [parametrised ×2]
    """
    torch.manual_seed(0)
    loaded = load_model(SPEC)
    loaded.data_config.update(config)
    loaded.__dict__.pop("transform", None)
    loaded.__dict__.pop("_split_transform", None)
    pil = torch.cat([b.tensor for b in _batches(loaded, jpegs, "pil")])
    ten = torch.cat([b.tensor for b in _batches(loaded, jpegs, "tensor")])
    assert pil.shape == ten.shape == (len(jpegs), 3, 64, 64)
    level = 1 / 255 / min(loaded.data_config["std"])
    pixel = (pil - ten).abs()
    a, b = forward_logits(loaded, pil), forward_logits(loaded, ten)
    print(f"\n{config}: pixels mean |Δ| {pixel.mean() / level:.3f} levels, max {pixel.max() / level:.1f} levels; "
          f"max |Δ logit| {(a - b).abs().max():.2e} (logit range {a.abs().max():.2f}); top-1 agreement "
          f"{(a.argmax(1) == b.argmax(1)).float().mean():.0%}")
    assert pixel.mean() < 1.0 * level  # resampling rounding: under one uint8 level on average
    assert (a.argmax(1) == b.argmax(1)).all()
    assert (a - b).abs().max() < 0.05 * a.abs().max()


def test_files_the_tensor_decoder_cannot_take_fall_back_one_by_one(jpegs, tmp_path):
    """PNG, CMYK and progressive JPEGs, a corrupt JPEG, a truncated one and a missing file in one batch: the same
    files are readable, with the same pixels (to rounding), and the same ones fail, as on the PIL path."""
    loaded = load_model(SPEC)
    photo = Image.open(jpegs[0]).convert("RGB")
    photo.save(tmp_path / "a.png")
    photo.convert("CMYK").save(tmp_path / "cmyk.jpg")
    photo.save(tmp_path / "progressive.jpg", progressive=True, quality=90)
    (tmp_path / "corrupt.jpg").write_bytes(b"\xff\xd8\xff" + b"\x00garbage" * 50)
    data = jpegs[1].read_bytes()
    (tmp_path / "truncated.jpg").write_bytes(data[: len(data) // 3])
    files = [jpegs[0], tmp_path / "a.png", tmp_path / "cmyk.jpg", tmp_path / "corrupt.jpg",
             tmp_path / "progressive.jpg", tmp_path / "truncated.jpg", tmp_path / "missing.jpg", jpegs[2]]
    pil, ten = _batches(loaded, files, "pil"), _batches(loaded, files, "tensor")

    def errors(batches):
        return {p: e for b in batches for p, _, e in b.items if e is not None}

    assert set(errors(pil)) == set(errors(ten)) and str(tmp_path / "corrupt.jpg") in errors(ten)
    good_pil = torch.cat([b.tensor for b in pil if b.tensor is not None])
    good_ten = torch.cat([b.tensor for b in ten if b.tensor is not None])
    assert good_pil.shape == good_ten.shape
    level = 1 / 255 / min(loaded.data_config["std"])
    per_image = (good_pil - good_ten).abs().mean(dim=(1, 2, 3))
    assert (per_image < 2 * level).all(), per_image / level


def test_decoder_choice():
    """Auto → PIL on CPU; explicit tensor/pil honoured; crop_mode "border" falls back to PIL; unknown decoder raises."""
    loaded = load_model(SPEC)
    from vitstudio.core.inference import use_tensor_decoder

    assert not use_tensor_decoder(loaded, "auto")  # a CPU model: PIL, the exact reference
    assert use_tensor_decoder(loaded, "tensor") and not use_tensor_decoder(loaded, "pil")
    loaded.data_config["crop_mode"] = "border"
    assert not use_tensor_decoder(loaded, "tensor")  # no tensor equivalent: PIL
    with pytest.raises(ValueError, match="Unknown decoder"):
        use_tensor_decoder(loaded, "gpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (nvJPEG)")
def test_gpu_decode_matches_the_cpu_path(jpegs):
    """nvJPEG decode within 2 levels of CPU; GPU batches' top-1 equal PIL's. [CUDA only]"""
    files = [tensor_decode.read_bytes(str(p)) for p in jpegs]
    cpu = tensor_decode.decode(files, "cpu")
    gpu = tensor_decode.decode(files, "cuda")
    for (_, a, _), (_, b, _) in zip(cpu, gpu):
        assert a.shape == b.shape and b.device.type == "cuda"
        assert (a.float() - b.cpu().float()).abs().mean() < 2.0  # nvJPEG's IDCT rounding
    loaded = load_model(SPEC, device="cuda")
    ten = torch.cat([b.tensor for b in _batches(loaded, jpegs, "auto")])
    assert ten.device.type == "cuda"
    pil = torch.cat([b.tensor for b in _batches(loaded, jpegs, "pil")])
    a, b = forward_logits(loaded, pil.cuda()), forward_logits(loaded, ten)
    assert (a.argmax(1) == b.argmax(1)).all()
    pixels = (pil.cuda() - ten).abs().mean()
    print(f"\nGPU vs PIL: max |Δ logit| {(a - b).abs().max():.2e}, pixels mean |Δ| {pixels:.4f}")
    assert np.isfinite(b.cpu().numpy()).all()


def test_training_cache_built_by_the_tensor_decoder(jpegs, tmp_path):
    """The decoded-image cache of a training run, built a batch at a time by the tensor decoder (as on a GPU):
    the same shapes, the same failures and pixels within rounding of PIL's, under its own cache key."""
    from tests.core.generators import drain
    from vitstudio.core.data.imagecache import build_cache, cache_key

    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xff broken")
    files = [*jpegs, tmp_path / "bad.jpg"]
    pil = drain(build_cache(files, 80, folder=tmp_path / "c1", decoder="pil"))
    ten = drain(build_cache(files, 80, folder=tmp_path / "c2", decoder="tensor"))
    assert cache_key(files, 80, "tensor") != cache_key(files, 80, "pil")
    assert (pil.shapes == ten.shapes).all() and pil.bad == ten.bad == [len(jpegs)]
    assert set(pil.failed) == set(ten.failed) == {str(tmp_path / "bad.jpg")}
    diff = np.abs(np.asarray(pil.data, np.int16) - np.asarray(ten.data, np.int16))
    assert diff.mean() < 1.0 and np.quantile(diff, 0.999) <= 4, (diff.mean(), diff.max())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (nvJPEG)")
def test_gpu_training_cache_matches_pils(jpegs, tmp_path):
    """A run's decoded-image cache built on the training GPU (what 'auto' does there) against PIL's: same shapes
    and failures, pixels within nvJPEG's and the resampler's rounding.

    [CUDA only]
    """
    from tests.core.generators import drain
    from vitstudio.core.data.imagecache import build_cache

    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xff broken")
    files = [*jpegs, tmp_path / "bad.jpg"]
    pil = drain(build_cache(files, 80, folder=tmp_path / "c1", decoder="pil"))
    gpu = drain(build_cache(files, 80, folder=tmp_path / "c2", device=torch.device("cuda"), decoder="auto"))
    assert (pil.shapes == gpu.shapes).all() and pil.bad == gpu.bad == [len(jpegs)]
    diff = np.abs(np.asarray(pil.data, np.int16) - np.asarray(gpu.data, np.int16))
    print(f"\nGPU training cache vs PIL: mean |Δ| {diff.mean():.3f} levels, 99.9 % ≤ {np.quantile(diff, 0.999):.0f}")
    assert diff.mean() < 1.5 and np.quantile(diff, 0.999) <= 8
