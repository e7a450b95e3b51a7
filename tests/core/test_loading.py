"""Every loading path: weight formats, timm folders, hub cache offline, seeds, custom ViTs, errors."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pytest
import timm
import torch
from safetensors.torch import save_file

from tests.conftest import TINY, TINY_SPEC, make_tiny_vit
from tests.core.seed_reference import SeedVisionTransformer, seed_transform
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import ModelLoadError, load_model, parse_custom


def _logits(loaded, img):
    return forward_logits(loaded, loaded.to_tensor(loaded.crop(img))[None])[0]


def _ref_logits(model, img):
    cfg = timm.data.resolve_model_data_config(model)
    cfg["input_size"] = (3, *model.patch_embed.img_size)
    with torch.no_grad():
        return model(timm.data.create_transform(**cfg)(img)[None])[0]


@pytest.mark.parametrize("suffix", [".pth", ".pt", ".bin", ".safetensors"])
def test_plain_state_dict_formats(tmp_path, rgb_image, suffix):
    """.pth/.pt/.bin (with DDP "module." prefix) and .safetensors load with logits equal timm's own forward and
    preprocessing. [parametrised ×4]
    """
    model = make_tiny_vit(seed=3)
    path = tmp_path / f"w{suffix}"
    if suffix == ".safetensors":
        save_file(model.state_dict(), str(path))
    else:
        torch.save({"module." + k: v for k, v in model.state_dict().items()}, path)  # DDP prefix too
    loaded = load_model(TINY_SPEC, weights=path)
    torch.testing.assert_close(_logits(loaded, rgb_image), _ref_logits(model, rgb_image), atol=1e-5, rtol=0)
    assert loaded.weights_source == str(path)


def test_timm_train_checkpoint_prefers_ema(tmp_path, rgb_image):
    """A timm train checkpoint loads state_dict_ema when present, else state_dict; reference: timm's forward of each."""
    raw, ema = make_tiny_vit(seed=1), make_tiny_vit(seed=2)
    ckpt = {"epoch": 7, "arch": "vit", "args": argparse.Namespace(lr=0.1),
            "state_dict": raw.state_dict(), "state_dict_ema": ema.state_dict()}
    torch.save(ckpt, tmp_path / "last.pth.tar")
    loaded = load_model(TINY_SPEC, weights=tmp_path / "last.pth.tar")
    torch.testing.assert_close(_logits(loaded, rgb_image), _ref_logits(ema, rgb_image), atol=1e-5, rtol=0)
    del ckpt["state_dict_ema"]
    torch.save(ckpt, tmp_path / "noema.pth")
    loaded = load_model(TINY_SPEC, weights=tmp_path / "noema.pth")
    torch.testing.assert_close(_logits(loaded, rgb_image), _ref_logits(raw, rgb_image), atol=1e-5, rtol=0)


class _Payload:  # a pickled object that would run code on load with weights_only=False
    def __reduce__(self):
        return (print, ("pwned",))


def _never_advises_running_it(message: str) -> None:
    """torch's refusal advises re-loading with weights_only=False ("This file can still be loaded…"): a user must
    never be told that about a file that may run code (issue 29, item 18)."""
    assert "pickled Python objects" in message and "\n" not in message and "\x1b" not in message
    assert "weights_only" not in message and "can still be loaded" not in message, message


def test_checkpoint_that_runs_code_is_refused(tmp_path, capsys):
    """A pickle with a code-running payload is refused ("weights_only") and nothing runs. The refusal is one line and
    never advises weights_only=False (issue 29, item 18).
    """
    torch.save({"state_dict": make_tiny_vit().state_dict(), "evil": _Payload()}, tmp_path / "evil.pth")
    with pytest.raises(ModelLoadError) as refused:
        load_model(TINY_SPEC, weights=tmp_path / "evil.pth")
    _never_advises_running_it(str(refused.value))
    assert "pwned" not in capsys.readouterr().out


def test_a_run_checkpoint_that_runs_code_is_refused_in_one_line(tmp_path, capsys):
    """A run's checkpoint-last.pt with pickled objects (resume reads it): refused in one line of ViT Studio's,
    never torch's message (it was quoted, cut at 120 characters, with its terminal escapes)."""
    from vitstudio.core.train.runs import CHECKPOINT, RunFileError, read_checkpoint

    torch.save({"model": make_tiny_vit().state_dict(), "evil": _Payload()}, tmp_path / CHECKPOINT)
    with pytest.raises(RunFileError) as refused:
        read_checkpoint(tmp_path)
    _never_advises_running_it(str(refused.value))
    assert "pwned" not in capsys.readouterr().out


def _to_jax_npz(model, path):
    """Write `model` in the original JAX ViT .npz naming (independent of timm's converter)."""
    w = {
        "embedding/kernel": model.patch_embed.proj.weight.permute(2, 3, 1, 0),  # OIHW -> HWIO
        "embedding/bias": model.patch_embed.proj.bias,
        "cls": model.cls_token,
        "Transformer/posembed_input/pos_embedding": model.pos_embed,
        "Transformer/encoder_norm/scale": model.norm.weight, "Transformer/encoder_norm/bias": model.norm.bias,
        "head/kernel": model.head.weight.T, "head/bias": model.head.bias,
    }
    dim, heads = model.embed_dim, model.blocks[0].attn.num_heads
    for i, blk in enumerate(model.blocks):
        p = f"Transformer/encoderblock_{i}/"
        qkv_w, qkv_b = blk.attn.qkv.weight.reshape(3, dim, dim), blk.attn.qkv.bias.reshape(3, dim)
        for j, n in enumerate(("query", "key", "value")):
            w[f"{p}MultiHeadDotProductAttention_1/{n}/kernel"] = qkv_w[j].T.reshape(dim, heads, dim // heads)
            w[f"{p}MultiHeadDotProductAttention_1/{n}/bias"] = qkv_b[j].reshape(heads, dim // heads)
        w[f"{p}MultiHeadDotProductAttention_1/out/kernel"] = blk.attn.proj.weight.T.reshape(heads, dim // heads, dim)
        w[f"{p}MultiHeadDotProductAttention_1/out/bias"] = blk.attn.proj.bias
        w[f"{p}LayerNorm_0/scale"], w[f"{p}LayerNorm_0/bias"] = blk.norm1.weight, blk.norm1.bias
        w[f"{p}LayerNorm_2/scale"], w[f"{p}LayerNorm_2/bias"] = blk.norm2.weight, blk.norm2.bias
        w[f"{p}MlpBlock_3/Dense_0/kernel"], w[f"{p}MlpBlock_3/Dense_0/bias"] = blk.mlp.fc1.weight.T, blk.mlp.fc1.bias
        w[f"{p}MlpBlock_3/Dense_1/kernel"], w[f"{p}MlpBlock_3/Dense_1/bias"] = blk.mlp.fc2.weight.T, blk.mlp.fc2.bias
    np.savez(path, **{k: v.detach().numpy() for k, v in w.items()})


def test_jax_npz(tmp_path, rgb_image):
    """Original JAX ViT .npz naming (written by the test, independent of timm's converter) loads with logits equal
    timm's forward.
    """
    model = make_tiny_vit(seed=4)
    _to_jax_npz(model, tmp_path / "ViT-tiny.npz")
    loaded = load_model(TINY_SPEC, weights=tmp_path / "ViT-tiny.npz")
    torch.testing.assert_close(_logits(loaded, rgb_image), _ref_logits(model, rgb_image), atol=1e-5, rtol=0)


def test_timm_model_folder_local_dir_and_models_dir(tmp_path, rgb_image, monkeypatch):
    """A save_for_hf folder loads by `local-dir:`, path, or bare name under VITSTUDIO_MODELS_DIR with its label names
    and timm's logits; it is listed first in the catalog as local.
    """
    from timm.models import save_for_hf

    model = timm.create_model("vit_base_patch16_224", pretrained=False, **{**TINY, "num_classes": 3})
    model.load_state_dict(make_tiny_vit(seed=5, num_classes=3).state_dict())
    models = tmp_path / "models"
    folder = models / "my-flowers"
    save_for_hf(model, str(folder), model_config={"label_names": ["daisy", "rose", "tulip"]})
    for spec in (f"local-dir:{folder}", str(folder)):
        loaded = load_model(spec)
        assert loaded.labels == ["daisy", "rose", "tulip"] and loaded.kind == "timm"
        torch.testing.assert_close(_logits(loaded, rgb_image), _ref_logits(model.eval(), rgb_image),
                                   atol=1e-5, rtol=0)
    monkeypatch.setenv("VITSTUDIO_MODELS_DIR", str(models))
    assert load_model("my-flowers").labels[2] == "tulip"  # a bare folder name under models/
    from vitstudio.core.models.catalog import list_catalog
    first = list_catalog()[0]
    assert first.source == "local" and first.name == str(folder) and first.local


def _write_seed(tmp_path, rep_size=None, distilled=False, with_indices=True):
    torch.manual_seed(11)
    ref = SeedVisionTransformer(img_size=224, patch_size=32, num_classes=5, embed_dim=192, depth=2, num_heads=3,
                                representation_size=rep_size, distilled=distilled).eval()
    folder = tmp_path / "seed"
    folder.mkdir()
    torch.save(ref.state_dict(), folder / "model-9.pth")
    if with_indices:
        names = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
        (folder / "class_indices.json").write_text(json.dumps({str(i): n for i, n in enumerate(names)}, indent=4))
    return folder, ref


@pytest.mark.parametrize("rep_size, distilled", [(None, False), (192, False), (96, False), (None, True)])
def test_seed_checkpoint(tmp_path, photos, rep_size, distilled):
    """Seed checkpoints (plain, pre-logits 192/96, distilled) by folder or file: kind, labels, heads, prefix tokens,
    seed data config and logits equal the upstream vit_model.py port with upstream's torchvision transform.
    [parametrised ×4]
    """
    folder, ref = _write_seed(tmp_path, rep_size, distilled)
    img = read_image(photos["astronaut"])
    with torch.no_grad():
        expected = ref(seed_transform()(img)[None])[0]
    for spec in (str(folder), str(folder / "model-9.pth")):
        loaded = load_model(spec)
        assert loaded.kind == "seed" and loaded.labels[3] == "sunflowers"
        assert loaded.model.blocks[0].attn.num_heads == 3  # width 192 -> 3 heads (ViT-Ti row of the table)
        assert loaded.num_prefix_tokens == (2 if distilled else 1)
        cfg = loaded.data_config
        assert cfg["interpolation"] == "bilinear" and cfg["mean"] == (0.5, 0.5, 0.5) and cfg["std"] == (0.5,) * 3
        assert loaded.crop(img).size == (224, 224)
        torch.testing.assert_close(_logits(loaded, img), expected, atol=1e-5, rtol=0)


def test_upstream_layout(tmp_path, photos):
    """Upstream train.py writes ./class_indices.json beside ./weights/model-{epoch}.pth: the root, the weights
    folder or one epoch file all load with the class names; a folder of epochs means the latest, and says so."""
    root = tmp_path / "vision_transformer"
    (root / "weights").mkdir(parents=True)
    names = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
    (root / "class_indices.json").write_text(json.dumps({str(i): n for i, n in enumerate(names)}, indent=4))
    refs = []
    for epoch in range(3):
        torch.manual_seed(epoch)
        ref = SeedVisionTransformer(img_size=32, patch_size=8, num_classes=5, embed_dim=64, depth=1,
                                    num_heads=1).eval()
        torch.save(ref.state_dict(), root / "weights" / f"model-{epoch}.pth")
        refs.append(ref)
    img = read_image(photos["coffee"])
    for spec, epoch in ((root, 2), (root / "weights", 2), (root / "weights" / "model-1.pth", 1)):
        loaded = load_model(str(spec))
        assert loaded.labels == names, spec
        assert loaded.weights_source.startswith(str(root / "weights" / f"model-{epoch}.pth"))
        with torch.no_grad():
            expected = refs[epoch](loaded.to_tensor(loaded.crop(img))[None])[0]
        torch.testing.assert_close(_logits(loaded, img), expected, atol=1e-5, rtol=0)
    assert "latest of 3 epoch checkpoints" in load_model(str(root / "weights")).weights_source
    (root / "weights" / "notes.pth").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="name the file you mean"):
        load_model(str(root / "weights"))


@pytest.mark.parametrize("spec, message", [
    ("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=0", "num_classes=0 is outside the valid range 1.."),
    ("custom:img=1000000,patch=16", "img_size=1000000 is outside the valid range"),
    ("custom:width=10000000", "embed_dim=10000000 is outside"),
    ("custom:depth=100000", "depth=100000 is outside"),
    ("custom:img=4096,patch=4,width=1024,depth=24,heads=16", "would need about"),
    ("custom:img=33,patch=8", "multiple of the patch size"),
    ("custom:width=100,heads=3", "multiple of the number of heads"),
])
def test_absurd_configs_fail_before_allocating(spec, message):
    """out-of-range/oversized/indivisible `custom:` specs raise ModelLoadError in < 0.5 s with the valid range.
    [parametrised ×7]
    """
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match=message) as info:
        load_model(spec)
    assert time.perf_counter() - start < 0.5  # refused from the numbers, nothing was built
    assert "img=8..8192" in str(info.value) or "would need" in str(info.value) or "multiple" in str(info.value)


def test_bad_model_folders_name_the_problem(tmp_path, tiny_weights):
    """A config.json asking for 100000 blocks, or a truncated model.safetensors: one clear message, at once."""
    from timm.models import save_for_hf

    folder = tmp_path / "run"
    save_for_hf(make_tiny_vit(), str(folder), safe_serialization=True)
    config = json.loads((folder / "config.json").read_text())
    good = json.loads(json.dumps(config))
    config.setdefault("model_args", {})["depth"] = 100000
    (folder / "config.json").write_text(json.dumps(config))
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match="depth=100000 is outside the valid range"):
        load_model(str(folder))
    assert time.perf_counter() - start < 0.5
    (folder / "config.json").write_text(json.dumps(good))
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(ModelLoadError, match="model.safetensors in"):
        load_model(str(folder))


def test_seed_without_class_indices_and_mismatch(tmp_path):
    """Without class_indices.json labels are "class i"; a count mismatch raises."""
    folder, _ = _write_seed(tmp_path, with_indices=False)
    assert load_model(str(folder)).labels == [f"class {i}" for i in range(5)]
    (folder / "class_indices.json").write_text(json.dumps({"0": "a", "1": "b"}))
    with pytest.raises(ModelLoadError, match="names 2 classes but the model has 5"):
        load_model(str(folder))


def _fake_hub_cache(cache_root, repo_id, files: dict[str, bytes]):
    """Lay files out exactly as huggingface_hub's cache does (refs/main -> snapshots/<commit>/...)."""
    repo_dir = cache_root / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    snap = repo_dir / "snapshots" / commit
    snap.mkdir(parents=True)
    for name, data in files.items():
        (snap / name).write_bytes(data)


def test_hub_name_offline_fails_fast_then_loads_from_cache(tmp_path, rgb_image):
    """Uncached hub name fails in < 1 s naming HF_HUB_OFFLINE; once in a fake HF cache it is listed locally, loads
    ImageNet labels, timm's data config and logits.
    """
    from huggingface_hub import constants

    name = "vit_tiny_patch16_224.augreg_in21k_ft_in1k"
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match="not in the local cache.*HF_HUB_OFFLINE.*models"):
        load_model(name)
    assert time.perf_counter() - start < 1.0
    from vitstudio.core.models.catalog import is_cached, list_catalog
    assert not is_cached(name)

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", num_classes=1000).eval()
    save_file(model.state_dict(), str(tmp_path / "m.safetensors"))
    _fake_hub_cache(__import__("pathlib").Path(constants.HF_HUB_CACHE), f"timm/{name}",
                    {"model.safetensors": (tmp_path / "m.safetensors").read_bytes()})
    assert is_cached(name)
    assert [e.name for e in list_catalog(name, local_only=True)] == [name]
    loaded = load_model(name)
    assert loaded.labels[1].startswith("goldfish") and loaded.label_set == "imagenet-1k"
    assert loaded.data_config["interpolation"] == "bicubic" and loaded.data_config["crop_pct"] == 0.9
    with torch.no_grad():
        ref = model(timm.data.create_transform(**timm.data.resolve_model_data_config(model))(rgb_image)[None])[0]
    torch.testing.assert_close(_logits(loaded, rgb_image), ref, atol=1e-5, rtol=0)


def test_a_folder_named_like_a_timm_model_does_not_shadow_it(tmp_path, monkeypatch):
    """An empty (or unrelated) folder `vit_tiny_patch16_224` in the working directory: the name still means the
    timm model (here: offline, so the hub message), not "the folder should hold config.json"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vit_tiny_patch16_224").mkdir()
    (tmp_path / "vit_tiny_patch16_224" / "notes.txt").write_text("my notes")
    loaded = load_model("vit_tiny_patch16_224", pretrained=False)
    assert loaded.architecture.startswith("vit_tiny_patch16_224") and loaded.kind == "random"
    with pytest.raises(ModelLoadError, match="not in the local cache"):
        load_model("vit_tiny_patch16_224.augreg_in21k")


def test_hf_hub_repo_offline(tmp_path):
    """`hf-hub:` repo fails fast offline; from a fake cache loads with its labels and size."""
    from huggingface_hub import constants

    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match="not in the local cache"):
        load_model("hf-hub:someone/vit-flowers")
    assert time.perf_counter() - start < 1.0
    from timm.models import save_for_hf

    model = timm.create_model("vit_base_patch16_224", pretrained=False, **TINY)
    save_for_hf(model, str(tmp_path / "export"), model_config={"label_names": list("abcde")})
    _fake_hub_cache(__import__("pathlib").Path(constants.HF_HUB_CACHE), "someone/vit-flowers",
                    {f.name: f.read_bytes() for f in (tmp_path / "export").iterdir()})
    loaded = load_model("hf-hub:someone/vit-flowers")
    assert loaded.labels == list("abcde") and loaded.input_hw == (32, 32)


def test_custom_vit_spec():
    """`parse_custom` parses all fields; the model has the right grid/classes/depth; bad specs raise."""
    kw = parse_custom("custom:img=64,patch=16,width=96,depth=3,heads=4,classes=7")
    assert kw == dict(img_size=64, patch_size=16, embed_dim=96, depth=3, num_heads=4, num_classes=7)
    loaded = load_model("custom:img=64,patch=16,width=96,depth=3,heads=4,classes=7")
    assert loaded.grid_size == (4, 4) and loaded.num_classes == 7 and len(loaded.model.blocks) == 3
    for bad in ("custom:img=30,patch=16", "custom:size=3", "custom:width=10,heads=3"):
        with pytest.raises(ModelLoadError):
            load_model(bad)


def test_clear_errors(tmp_path):
    """Typo suggests "Did you mean", missing/garbage/mismatched weights, unavailable device and bad precision each raise
    a clear ModelLoadError.
    """
    with pytest.raises(ModelLoadError, match="Did you mean vit_base_patch16_224"):
        load_model("vit_base_patch16_22")
    with pytest.raises(ModelLoadError, match="not found"):
        load_model(TINY_SPEC, weights=tmp_path / "nope.safetensors")
    (tmp_path / "junk.pth").write_bytes(b"PK\x03\x04 a torn zip archive")
    with pytest.raises(ModelLoadError, match="Could not read"):
        load_model(TINY_SPEC, weights=tmp_path / "junk.pth")
    save_file(make_tiny_vit(num_classes=5, embed_dim=64).state_dict(), str(tmp_path / "wide.safetensors"))
    with pytest.raises(ModelLoadError, match="does not (match|fit)"):
        load_model(TINY_SPEC, weights=tmp_path / "wide.safetensors")
    with pytest.raises(ModelLoadError, match="not available"):
        load_model(TINY_SPEC, device="cuda:7")
    with pytest.raises(ModelLoadError, match="precision"):
        load_model(TINY_SPEC, precision="int3")


def test_device_auto_is_cpu_here():
    """`resolve_device("auto")` is cuda if available else cpu (or mps); explicit cpu honoured."""
    from vitstudio.core.models.devices import resolve_device

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type in (expected, "mps")
    assert load_model(TINY_SPEC, device="cpu").device.type == "cpu"


def test_download_progress_is_forwarded():
    """huggingface_hub drives a tqdm class; ours forwards its byte counts to the GUI/CLI callback."""
    from vitstudio.core.models.hub import _progress_tqdm

    seen = []
    bar_cls = _progress_tqdm(lambda done, total, msg: seen.append((done, total, msg)), "Downloading x")
    bar = bar_cls(total=300, unit="B")
    for _ in range(3):
        bar.update(100)
    bar.close()
    assert seen == [(100, 300, "Downloading x"), (200, 300, "Downloading x"), (300, 300, "Downloading x")]


def test_a_loaded_model_is_complete_when_built_and_its_card_goes_with_it():
    """load_model builds the LoadedModel once, with the device and precision it runs in (issue 30, item 6):
    nothing finishes it afterwards, so it is frozen; its card is measured once and freed with the model."""
    import dataclasses
    import gc
    import weakref

    from vitstudio.core.models.modelcard import model_card

    loaded = load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3", device="cpu", precision="auto")
    assert loaded.device == torch.device("cpu") and loaded.precision == "fp32"  # 'auto' resolved for the CPU
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.precision = "bf16"
    card = model_card(loaded)
    assert model_card(loaded) is card and card.device == "cpu" and card.precision == "fp32"
    gone = weakref.ref(loaded)
    del loaded
    gc.collect()
    assert gone() is None  # the card cache does not keep the model alive
