"""`PlainPreprocess` (core/data/preprocess.py): timm's eval transform as Pillow calls and numpy, for the decode
workers of a cluster pass, which then import no torch. Checked against torchvision's own output on the same images,
bit for bit; a transform of any other shape has no plain form."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from vitstudio.core.data.preprocess import PlainPreprocess, decode_and_crop
from vitstudio.core.folder.ray_jobs import plain_preprocess
from vitstudio.core.models.loading import load_model

CONFIGS = {  # timm's keys as data configs carry them: the centre crop at several crop_pct, squash, padding
    "bicubic 0.875": dict(input_size=(3, 32, 32), interpolation="bicubic", crop_pct=0.875, crop_mode="center"),
    "bilinear 1.0": dict(input_size=(3, 32, 32), interpolation="bilinear", crop_pct=1.0, crop_mode="center"),
    "squash": dict(input_size=(3, 32, 32), interpolation="bicubic", crop_pct=0.9, crop_mode="squash"),
    "not square, squashed": dict(input_size=(3, 24, 40), interpolation="bilinear", crop_pct=0.95,
                                 crop_mode="squash"),
    "crop_pct over 1 (padded)": dict(input_size=(3, 33, 33), interpolation="bicubic", crop_pct=1.3,
                                     crop_mode="center"),
    "nearest": dict(input_size=(3, 32, 32), interpolation="nearest", crop_pct=0.875, crop_mode="center"),
}
SIZES = [(32, 32), (37, 64), (64, 37), (5, 90), (90, 5), (1, 1), (200, 151), (33, 34)]  # (width, height)


@pytest.fixture(scope="module")
def tiny():
    return load_model(TINY_SPEC, device="cpu")


def _images():
    rng = np.random.default_rng(3)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), np.uint8)) for w, h in SIZES]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_plain_steps_equal_torchvisions_bit_for_bit(tiny, name):
    """For each kind of timm eval transform: the crop (its pixels) and the normalised array equal torchvision's
    exactly, on images wide, tall, tiny and exactly the crop's size."""
    config = {**tiny.data_config, **CONFIGS[name], "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
    loaded = dataclasses.replace(tiny, data_config=config)
    plain = plain_preprocess(loaded)
    assert isinstance(plain, PlainPreprocess) and plain.input_hw == loaded.input_hw
    for image in _images():
        theirs, ours = loaded.crop(image), plain.crop(image)
        assert ours.size == theirs.size == loaded.input_hw[::-1]
        assert ours.tobytes() == theirs.tobytes(), (name, image.size)
        np.testing.assert_array_equal(plain.to_tensor(ours), loaded.to_tensor(theirs).numpy())


def test_other_transforms_have_no_plain_form(tiny):
    """timm's border mode, its centre crop of a size not square (ResizeKeepRatio) and a transformers processor's own
    steps: None (their decode needs the model)."""
    border = dataclasses.replace(tiny, data_config={**tiny.data_config, "crop_mode": "border", "crop_pct": 0.9})
    oblong = dataclasses.replace(tiny, data_config={**tiny.data_config, "input_size": (3, 24, 40)})
    processor = dataclasses.replace(tiny, data_config={**tiny.data_config, "crop_mode": "squash", "crop_pct": 1.0,
                                                       "hf_size": {"height": 32, "width": 32}})
    assert plain_preprocess(border) is plain_preprocess(oblong) is plain_preprocess(processor) is None


def test_decoding_a_file_is_the_same_either_way(tiny, tmp_path):
    """`decode_and_crop` with the model (one process) and with its plain form (a decode worker): the same crop and
    input for a readable file, the same reason for an unreadable one."""
    good, bad = tmp_path / "a photo.png", tmp_path / "broken.jpg"
    _images()[6].save(good)
    bad.write_bytes(b"not a jpeg")
    plain = plain_preprocess(tiny)
    for path in (good, bad):
        (p1, crop1, x1, err1, _), (p2, crop2, x2, err2, _) = decode_and_crop(tiny, path), decode_and_crop(plain, path)
        assert (p1, err1) == (p2, err2)
        if err1 is None:
            assert crop1.tobytes() == crop2.tobytes()
            np.testing.assert_array_equal(x2, x1.numpy())
        else:
            assert x1 is x2 is None and "not an image" in err1
