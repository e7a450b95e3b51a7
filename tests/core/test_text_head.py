"""A fine-tune of a CLIP-style model starts from the class names' text embeddings (issue 23 item 4): its first
validation, before any step, equals the zero-shot accuracy on the same split as OpenCLIP computes it; per image,
the folded head ranks the classes as zero-shot does; the run records how it started; the fine-tuned image tower is
an ordinary run that loads in ViT Studio and in plain timm with equal outputs."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import timm
import torch

from tests.conftest import imported_on_use
from tests.core.generators import run
from tests.core.synthetic_data import make_dataset
from tests.core.test_openclip import CLIP_CFG, SIGLIP_CFG
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import pooled_and_logits
from vitstudio.core.models.loading import load_model
from vitstudio.core.train.engine import fine_tune
from vitstudio.core.train.recipes import make_config
from vitstudio.core.train.text_head import START_FILE, HeadStart, prompt_word, read_head_start, text_init

open_clip = imported_on_use("open_clip")  # 1.5 s of import: only where these tests run


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("data") / "colours", per_class=12, size=40)


def _taught(cfg: dict, folder, tmp_path_factory, steps: int = 10):
    """A tiny OpenCLIP model given some zero-shot skill: a few steps of contrastive training on other images of
    the same colours with their names in random templates (zero-shot ~2/3 on these data: neither chance nor
    perfect), then saved the way the hub stores it."""
    from PIL import Image
    from safetensors.torch import save_model

    torch.manual_seed(0)
    model = (open_clip.CustomTextCLIP if cfg.get("custom_text") else open_clip.CLIP)(
        **{k: v for k, v in cfg.items() if k != "custom_text"})
    images = make_dataset(tmp_path_factory.mktemp("pretraining"), per_class=12, size=40, seed=1)
    size = cfg["vision_cfg"]["image_size"]
    x = torch.stack([torch.as_tensor(np.array(Image.open(p).convert("RGB").resize((size, size), Image.BICUBIC)),
                                     dtype=torch.float32).permute(2, 0, 1) / 127.5 - 1
                     for p in sorted(images.rglob("*.png"))])
    y = torch.arange(3).repeat_interleave(12)
    templates = [t("{}") for t in open_clip.OPENAI_IMAGENET_TEMPLATES] + ["{}"]
    optimiser, pick = torch.optim.Adam(model.parameters(), lr=1e-3), torch.Generator().manual_seed(0)
    for _ in range(steps):
        template = templates[int(torch.randint(len(templates), (1,), generator=pick))]
        tokens = open_clip.tokenize([template.format(c) for c in ("blue", "green", "red")], context_length=16)
        text = torch.nn.functional.normalize(model.encode_text(tokens), dim=-1)
        image = torch.nn.functional.normalize(model.encode_image(x), dim=-1)
        loss = torch.nn.functional.cross_entropy(10 * image @ text.T, y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    folder.mkdir(parents=True)
    preprocess = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bicubic"}
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": preprocess}))
    save_model(model.eval(), str(folder / "open_clip_model.safetensors"))
    return folder


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory):
    return _taught(CLIP_CFG, tmp_path_factory.mktemp("oc") / "tiny-clip", tmp_path_factory)


@pytest.fixture(scope="module")
def siglip_dir(tmp_path_factory):
    return _taught(SIGLIP_CFG, tmp_path_factory.mktemp("oc") / "tiny-siglip", tmp_path_factory)


def _val_split(out, data) -> tuple[list[str], list[int], list[str]]:
    manifest = json.loads((out / "split.json").read_text())
    classes = manifest["classes"]
    paths = [str(data / p) for p, _ in manifest["val"]]  # split.json names files relative to the dataset
    return paths, [int(label) for _, label in manifest["val"]], classes


@functools.cache
def _reference_tokenizer(name: str):
    """OpenCLIP's own tokenizer of a module fixture's folder, made once (~0.15 s of CPU each): only read."""
    return open_clip.get_tokenizer(name)


def _openclip_predictions(folder, loaded, paths, classes, templates) -> np.ndarray:
    """Zero-shot class per image, from OpenCLIP's own loading of the folder and its own classifier builder."""
    model = open_clip.create_model(f"local-dir:{folder}").eval()
    tokenizer = _reference_tokenizer(f"local-dir:{folder}")
    x = torch.stack([loaded.to_tensor(loaded.crop(read_image(p))) for p in paths])
    with torch.no_grad():
        weights = open_clip.build_zero_shot_classifier(model, tokenizer, [prompt_word(c) for c in classes],
                                                       list(templates), device="cpu")
        logits = model.logit_scale.exp() * model.encode_image(x, normalize=True) @ weights
        if model.logit_bias is not None:
            logits = logits + model.logit_bias
    return logits.argmax(1).numpy()


@pytest.mark.parametrize("which,preset,prompt", [("clip", "quick", "{}"), ("clip", "linear-probe", None),
                                                 ("siglip", "quick", None)])
def test_first_validation_is_the_zero_shot_accuracy(which, preset, prompt, data, clip_dir, siglip_dir, tmp_path):
    """The recorded head start (live and on disk) has OpenCLIP's templates and val_acc equal to OpenCLIP's zero-shot
    accuracy on the val split (> 0.5); text_head recorded; run logits equal plain timm; reference: OpenCLIP's
    build_zero_shot_classifier. [parametrised ×3] [fine-tune]
    """
    folder = clip_dir if which == "clip" else siglip_dir
    out = tmp_path / "run"
    config = make_config(data, str(folder), out, preset, epochs=2, batch_size=8, val_ratio=0.5, hflip=0.0,
                         prompt=prompt, device="cpu", **({} if preset == "quick" else {"data_path": "pil"}))
    result, records = run(fine_tune(config))
    assert result.status == "finished"
    start = read_head_start(out)
    assert start is not None and start.from_text and "text embeddings" in start.how
    assert [r for r in records if isinstance(r, HeadStart)] == [start]  # the GUI and CLI get it live too
    assert start.templates == ((prompt,) if prompt else tuple(t("{}") for t in open_clip.OPENAI_IMAGENET_TEMPLATES))
    paths, labels, classes = _val_split(out, data)
    base = load_model(str(folder))
    zero_shot = _openclip_predictions(folder, base, paths, classes, start.templates)
    assert start.val_acc == pytest.approx(float(np.mean(zero_shot == np.asarray(labels))), abs=1e-9)
    assert start.val_acc > 0.5  # well above chance (1/3): the run starts where zero-shot is
    # the run's settings say so, and its model is a timm model that plain timm builds with equal outputs
    assert json.loads((out / "train_config.json").read_text())["text_head"] is True
    ours, reference = load_model(str(out)), timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    x = torch.stack([ours.to_tensor(ours.crop(read_image(p))) for p in paths[:4]])
    with torch.no_grad():
        torch.testing.assert_close(ours.model(x), reference(x), atol=1e-5, rtol=0)
    assert ours.labels == classes


def test_folded_head_ranks_classes_as_zero_shot_per_image(data, clip_dir):
    """Not only the accuracy: the class order of every image equals zero-shot's, and the logits are zero-shot's
    logit_scale · cos up to one positive factor per image (the norm the fold cannot see)."""
    base = load_model(str(clip_dir))
    paths = sorted(str(p) for p in data.rglob("*.png"))
    classes = ["blue", "green", "red"]
    x = torch.stack([base.to_tensor(base.crop(read_image(p))) for p in paths])
    pooled, _ = pooled_and_logits(base, x)
    init = text_init(base, classes, None, pooled[:8])
    ours = (pooled.double() @ init.weight.double().T + init.bias.double())
    reference = _openclip_predictions(clip_dir, base, paths, classes, init.templates)
    assert np.array_equal(ours.argmax(1).numpy(), reference)
    assert len(set(reference.tolist())) > 1  # a check that can fail: the images are not all one class


def test_without_text_the_head_starts_at_random_and_says_so(data, clip_dir, tmp_path):
    """`text_head=False` records from_text False, "random", no val_acc. [fine-tune]"""
    out = tmp_path / "run"
    config = make_config(data, str(clip_dir), out, "quick", epochs=1, text_head=False, val_ratio=0.5, device="cpu")
    run(fine_tune(config))
    start = json.loads((out / START_FILE).read_text())
    assert start["from_text"] is False and "random" in start["how"] and start["val_acc"] is None


def test_a_prompt_without_a_slot_is_refused_before_anything_runs(data, clip_dir, tmp_path):
    """A prompt without "{}" raises "exactly once" and creates no run folder."""
    config = make_config(data, str(clip_dir), tmp_path / "run", "quick", prompt="a photo")
    with pytest.raises(ValueError, match="exactly once"):
        run(fine_tune(config))
    assert not (tmp_path / "run").exists()


def test_which_base_models_may_have_a_text_tower(clip_dir, tmp_path):
    """What the Training form asks (offline) before it offers to start the head from the class names.

    `may_have_text_tower` true for OpenCLIP folders/specs and uncached hf-hub, false for timm names, custom specs, timm
    folders, empty.
    """
    from tests.conftest import TINY_SPEC
    from vitstudio.core.models.loading import may_have_text_tower

    timm_folder = tmp_path / "timm-run"
    timm_folder.mkdir()
    (timm_folder / "config.json").write_text("{}")
    assert may_have_text_tower(str(clip_dir)) and may_have_text_tower("open_clip:ViT-B-32:openai")
    assert may_have_text_tower("hf-hub:someone/not-cached")  # could be either until it is fetched
    for spec in ("vit_base_patch16_224.augreg_in21k", TINY_SPEC, str(timm_folder), ""):
        assert not may_have_text_tower(spec), spec


def test_headless_models_say_how_to_get_classes(clip_dir, data, tmp_path, capsys):
    """`sort` refuses a model with no classes before it embeds anything (it raised deep in the plan before),
    naming --classes for a CLIP-style model; --classes takes a folder of class folders; an ONNX export is named."""
    from vitstudio.cli import main
    from vitstudio.core.models.loading import ModelLoadError
    from vitstudio.core.models.zeroshot import parse_classes

    assert main(["sort", str(data), "--model", str(clip_dir), "--out", str(tmp_path / "out"), "--dry-run"]) == 2
    assert "--classes" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert parse_classes(str(data)) == ["blue", "green", "red"]
    (tmp_path / "model.onnx").write_bytes(b"\x08\x07")
    with pytest.raises(ModelLoadError, match="ONNX export"):
        load_model(str(tmp_path / "model.onnx"))


def test_eval_of_a_clip_model_is_its_zero_shot_accuracy_on_the_folder(data, clip_dir, capsys):
    """`eval --prompt` on a CLIP model prints its zero-shot accuracy equal to OpenCLIP's on 36 images."""
    from vitstudio.cli import main

    assert main(["eval", str(data), "--model", str(clip_dir), "--device", "cpu", "--prompt", "{}"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    paths = sorted(str(p) for p in data.rglob("*.png"))
    labels = np.asarray([["blue", "green", "red"].index(p.split("/")[-2]) for p in paths])
    zero_shot = _openclip_predictions(clip_dir, load_model(str(clip_dir)), paths, ["blue", "green", "red"], ("{}",))
    assert first.startswith(f"accuracy {np.mean(zero_shot == labels):.4f} on 36 images") and "zero-shot" in first


def test_the_model_card_of_a_clip_model_without_classes_says_how_to_get_them(clip_dir):
    """Card head names Classes box/--classes for CLIP, not "none" once classes given, "fine-tune a head" for a headless
    ViT.
    """
    from vitstudio.core.models.modelcard import model_card
    from vitstudio.core.models.zeroshot import with_classes

    plain = load_model(str(clip_dir))
    assert "Classes box" in model_card(plain).head and "--classes" in model_card(plain).head
    assert not model_card(with_classes(plain, ["a cat", "a dog"], "{}")).head.startswith("none")
    headless_vit = load_model("custom:img=32,patch=8,width=32,depth=1,heads=2,classes=3")
    headless_vit.model.reset_classifier(0)  # a features-only ViT (DINO-like)
    assert "fine-tune a head" in model_card(headless_vit).head
