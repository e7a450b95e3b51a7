"""The size check takes each architecture's own defaults (never ViT-B/16's), runs before torch loads, stays within
the process's own memory limit, and a config.json of the wrong shape is refused in one line naming the file."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import timm
import torch
from PIL import Image
from timm.models import save_for_hf

from vitstudio.core.models import sizing
from vitstudio.core.models.loading import ModelLoadError, load_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("arch, img_size", [("vit_small_patch14_dinov2", 98), ("eva02_tiny_patch14_224", 56),
                                            ("vit_base_patch8_224", 40)])
def test_folders_of_other_patch_sizes_load_at_their_own_size(tmp_path, rgb_image, arch, img_size):
    """Each was refused: 'the image size (98) must be a multiple of the patch size (16)'.

    DINOv2 (p14), EVA-02 (p14), ViT-B/8 folders load at their own size with logits equal the timm model's forward.
    [parametrised ×3]
    """
    torch.manual_seed(0)
    model = timm.create_model(arch, pretrained=False, img_size=img_size, depth=1, num_classes=3).eval()
    save_for_hf(model, str(tmp_path / "m"), safe_serialization=True)
    loaded = load_model(str(tmp_path / "m"))
    assert loaded.input_hw == (img_size, img_size)
    x = torch.randn(2, 3, img_size, img_size)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(x), model(x), rtol=1e-5, atol=1e-5)


def test_defaults_come_from_the_architecture():
    """`architecture_defaults` from the name (patch, img, width, depth, heads), nothing guessed for unknown words;
    multiple-of-patch checks with the architecture's patch; so400m/384 accepted like timm.
    """
    assert sizing.architecture_defaults("vit_large_patch14_reg4_dinov2.lvd142m") == dict(
        patch_size=14, img_size=518, embed_dim=1024, depth=24, num_heads=16)
    assert sizing.architecture_defaults("vit_base_patch8_224")["patch_size"] == 8
    assert sizing.architecture_defaults("cait_xxs24_224") == {"img_size": 224}  # nothing guessed for unknown words
    # a DINOv2-L/14 fine-tuned at 518 px (was refused as 518 % 16 != 0)
    assert sizing.check_vit_args({"img_size": 518}, "x", architecture="vit_large_patch14_dinov2") is not None
    with pytest.raises(sizing.ModelTooLarge, match=r"image size \(100\) must be a multiple of the patch size \(14\)"):
        sizing.check_vit_args({"img_size": 100, "patch_size": 14}, "x")
    with pytest.raises(sizing.ModelTooLarge, match=r"image size \(8\) must be a multiple of the patch size \(14\)"):
        sizing.check_vit_args({"img_size": 8}, "x", architecture="vit_large_patch14_dinov2")
    # timm itself drops a remainder: SigLIP so400m sees 384 px as 27 patches of 14
    assert sizing.check_vit_args({}, "x", architecture="vit_so400m_patch14_siglip_384") is not None


def test_a_guessed_estimate_is_made_exact_on_the_meta_device(tmp_path, monkeypatch):
    """so400m is no size word: the closed form fills ViT-B's width (0.57 GB for 20 blocks), the meta build counts
    the real 1152-wide blocks (1.3 GB); with 1 GB usable only the exact count refuses it."""
    folder = tmp_path / "so400m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architecture": "vit_so400m_patch14_siglip_384", "num_classes": 0,
        "model_args": {"depth": 20}, "pretrained_cfg": {"input_size": [3, 384, 384]}}))
    monkeypatch.setattr(sizing, "usable_memory", lambda: 1 << 30)
    estimate = sizing.check_vit_args({"depth": 20}, "x", architecture="vit_so400m_patch14_siglip_384")
    assert estimate[1] < 1 << 30
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match=r"so400m/config.json: this ViT would need about 1\.[2-4] GB"):
        load_model(str(folder))
    assert time.perf_counter() - start < 3


def _cli(args: list[str], address_space: int | None = None) -> tuple[subprocess.CompletedProcess, float]:
    def limit():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "vitstudio", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, preexec_fn=limit, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return res, time.perf_counter() - start


def test_absurd_specs_are_refused_before_torch_loads_and_within_the_process_limit(tmp_path):
    """A 4-billion-parameter spec (16 GB) was accepted under a 9 GB limit and died; the check took >= 5 s.

    A 16 GB spec under a 9 GB RLIMIT_AS is refused in < 2 s, one line; an out-of-range img_size likewise. [subprocess]
    """
    spec = "custom:img=224,patch=16,width=4096,depth=20,heads=32,classes=10"
    res, seconds = _cli(["card", "--model", spec], address_space=9 << 30)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "more than this process can use" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert seconds < 2
    image = tmp_path / "x.png"  # an image that is there: the spec is what is refused
    Image.new("RGB", (8, 8)).save(image)
    res, seconds = _cli(["predict", str(image), "--model", "custom:img=16000000"])
    assert res.returncode == 2 and "img_size=16000000 is outside the valid range" in res.stderr and seconds < 2


def test_usable_memory_follows_the_address_space_limit():
    """`usable_memory()` is below a 3 GiB RLIMIT_AS. [subprocess]"""
    code = "from vitstudio.core.models.sizing import usable_memory; print(usable_memory())"
    limit = 3 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         preexec_fn=cap)
    assert 0 < int(out.stdout) < limit


@pytest.mark.parametrize("config, message", [
    ([1, 2], "expected a JSON object"),
    ({"architecture": "vit_tiny_patch16_224", "model_args": None}, "'model_args' must be an object"),
    ({"architecture": "vit_tiny_patch16_224", "pretrained_cfg": {"mean": "x"}}, "'pretrained_cfg.mean' must be"),
    ({"architecture": "vit_tiny_patch16_224", "pretrained_cfg": {"input_size": [3, "a", 2]}}, "input_size"),
    ({"architecture": "vit_tiny_patch16_224", "model_args": {"depth": "twelve"}}, "depth must be a number"),
    ({"model_args": {"depth": 2}}, "no 'architecture'"),
    ({"architecture": 5}, "'architecture' must be a timm architecture name"),
])
def test_config_json_of_the_wrong_shape_is_named(tmp_path, config, message):
    """Seven malformed config.json shapes raise one-line ModelLoadError naming the file; the CLI exits 2 without
    traceback. [subprocess] [parametrised ×7]
    """
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=message) as info:
        load_model(str(folder))
    assert str(folder / "config.json") in str(info.value) and "\n" not in str(info.value)
    res, _ = _cli(["card", "--model", str(folder)])
    assert res.returncode == 2 and "Traceback" not in res.stderr and message.split("'")[0] in res.stderr
