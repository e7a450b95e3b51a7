"""Checkpoints in Hugging Face transformers' format (ViT, DeiT with a distillation head, DINOv2 with its class+mean
classifier, layer scale and SwiGLU, position embeddings resampled from their stored size, BEiT with per-block or
shared relative position bias) load as timm models: the
same labels (id2label), the same preprocessing (preprocessor_config.json) and the same logits as transformers' own
model on real photos. transformers is a dev-only dependency: it builds the tiny reference checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import ModelLoadError, load_model

transformers = pytest.importorskip("transformers")
LABELS = {0: "daisy", 1: "roses", 2: "tulips"}
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32,
             patch_size=8, num_labels=3, id2label=LABELS, label2id={v: k for k, v in LABELS.items()})


def _jitter(model) -> None:
    """transformers initialises some weights to zero: make every one matter."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))


def _vit(folder):
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(transformers.ViTConfig(**SIZES)).eval()
    _jitter(model)
    model.save_pretrained(folder)
    processor = transformers.ViTImageProcessorPil(size={"height": 32, "width": 32}, resample=2,
                                               image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    processor.save_pretrained(folder)
    return model, processor


def _deit(folder):
    torch.manual_seed(1)
    model = transformers.DeiTForImageClassificationWithTeacher(transformers.DeiTConfig(**SIZES)).eval()
    _jitter(model)
    model.save_pretrained(folder)
    processor = transformers.DeiTImageProcessorPil(size={"height": 40, "width": 40}, crop_size={"height": 32,
                                                "width": 32}, do_center_crop=True, resample=3)
    processor.save_pretrained(folder)
    return model, processor


def _dinov2(folder, swiglu=False, registers=0):
    """Stored for 56 px (7×7 positions) and run at 32 px (4×4), as DINOv2 is stored for 518 and run at 224."""
    torch.manual_seed(2)
    if registers:
        config = transformers.Dinov2WithRegistersConfig(**{**SIZES, "image_size": 56}, layerscale_value=0.5,
                                                        num_register_tokens=registers)
        model = transformers.Dinov2WithRegistersForImageClassification(config).eval()
    else:
        config = transformers.Dinov2Config(**{**SIZES, "image_size": 56}, layerscale_value=0.5, use_swiglu_ffn=swiglu)
        model = transformers.Dinov2ForImageClassification(config).eval()
    _jitter(model)
    model.save_pretrained(folder)
    processor = transformers.BitImageProcessorPil(size={"shortest_edge": 40}, crop_size={"height": 32, "width": 32},
                                               do_center_crop=True, resample=3, image_mean=[0.485, 0.456, 0.406],
                                               image_std=[0.229, 0.224, 0.225])
    processor.save_pretrained(folder)
    return model, processor


def _deit_plain(folder):
    """DeiTForImageClassification: the distillation token is in the sequence, only the class token is classified."""
    torch.manual_seed(6)
    model = transformers.DeiTForImageClassification(transformers.DeiTConfig(**SIZES)).eval()
    _jitter(model)
    model.save_pretrained(folder)
    processor = transformers.DeiTImageProcessorPil(size={"height": 45, "width": 45}, crop_size={"height": 32,
                                                   "width": 32}, do_center_crop=True, resample=3)
    processor.save_pretrained(folder)
    return model, processor


def _beit(folder, **options):
    torch.manual_seed(4)
    config = transformers.BeitConfig(**{"layer_scale_init_value": 0.5, **SIZES, **options})
    model = transformers.BeitForImageClassification(config).eval()
    _jitter(model)
    model.save_pretrained(folder)
    processor = transformers.BeitImageProcessorPil(size={"height": 40, "width": 40}, crop_size={"height": 32,
                                                "width": 32}, do_center_crop=True, resample=3)
    processor.save_pretrained(folder)
    return model, processor


def _beit_shared(folder):
    """BEiT as pre-trained: one relative position bias shared by all blocks, absolute positions, class token."""
    return _beit(folder, use_relative_position_bias=False, use_shared_relative_position_bias=True,
                 use_absolute_position_embeddings=True, use_mean_pooling=False)


def _beit_no_layer_scale(folder):
    """layer_scale_init_value=0: no layer scale at all (timm's beit entry point would otherwise keep 0.1)."""
    return _beit(folder, layer_scale_init_value=0.0)


def _dinov2_swiglu(folder):
    return _dinov2(folder, swiglu=True)


def _dinov2_registers(folder):
    return _dinov2(folder, registers=4)


@pytest.mark.parametrize("make", [_vit, _deit, _deit_plain, _dinov2, _dinov2_swiglu, _dinov2_registers, _beit,
                                  _beit_shared, _beit_no_layer_scale],
                         ids=["vit", "deit-distilled", "deit", "dinov2", "dinov2-swiglu", "dinov2-registers", "beit",
                              "beit-shared-bias", "beit-no-layer-scale"])
def test_transformers_checkpoint_predicts_like_transformers(make, tmp_path, photos):
    """id2label labels; on four photos our pixels equal the transformers PIL processor's and logits equal transformers'
    own model; reference: transformers. [parametrised ×9]
    """
    folder = tmp_path / "checkpoint"
    reference, processor = make(folder)
    loaded = load_model(str(folder))
    assert loaded.labels == ["daisy", "roses", "tulips"] and loaded.label_set == "transformers config (id2label)"
    assert "transformers" in loaded.architecture
    # non-square photos: the resize must squash (ViT, DeiT, BEiT) or keep the aspect (DINOv2) as transformers'
    # processor (PIL backend) does, the crop margins floored as there
    for name in ("chelsea", "astronaut", "rocket", "coffee"):
        img = read_image(photos[name])
        pixels = processor(images=img, return_tensors="pt")["pixel_values"]
        ours = loaded.to_tensor(loaded.crop(img))[None]
        assert ours.shape == pixels.shape
        np.testing.assert_allclose(ours.numpy(), pixels.numpy(), atol=1e-5, rtol=0)  # the same PIL resize
        with torch.no_grad():
            expected = reference(pixel_values=ours).logits
        torch.testing.assert_close(forward_logits(loaded, ours), expected, atol=1e-5, rtol=0)


def test_transformers_checkpoint_fine_tunes_and_explains(tmp_path, photos):
    """A transformers ViT gives a rollout map and fine-tunes into a run with the new labels. [fine-tune]"""
    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.analysis.explain import explain
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    _vit(tmp_path / "checkpoint")
    loaded = load_model(str(tmp_path / "checkpoint"))
    assert explain(loaded, "rollout", read_image(photos["coffee"])).array.shape == (4, 4)
    data = make_dataset(tmp_path / "data", per_class=4)
    out = tmp_path / "run"
    assert drain(fine_tune(make_config(str(data), str(tmp_path / "checkpoint"), str(out), "linear-probe",
                                       epochs=1, batch_size=4))).status == "finished"
    assert load_model(str(out)).labels == ["blue", "green", "red"]


def test_dinov2_headless_and_fine_tuned(tmp_path, photos):
    """A headless Dinov2Model predicts nothing but explains (its class token pools), and a DINOv2 classifier
    fine-tunes into a plain timm ViT (new head on the class token) that plain timm loads with the same logits.

    [fine-tune]
    """
    import timm

    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.analysis import attention
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    torch.manual_seed(3)
    headless = transformers.Dinov2Model(transformers.Dinov2Config(**{**SIZES, "image_size": 32})).eval()
    headless.save_pretrained(tmp_path / "headless")
    loaded = load_model(str(tmp_path / "headless"))
    img = read_image(photos["coffee"])
    x = loaded.to_tensor(loaded.crop(img))[None]
    with torch.no_grad():
        expected = headless(pixel_values=x).pooler_output
        ours = loaded.model.forward_head(loaded.model.forward_features(x), pre_logits=True)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)
    assert attention.rollout(loaded, x).shape == (1, 4, 4)

    _dinov2(tmp_path / "classifier")
    data = make_dataset(tmp_path / "data", per_class=4)
    out = tmp_path / "run"
    assert drain(fine_tune(make_config(str(data), str(tmp_path / "classifier"), str(out), "last-blocks",
                                       epochs=1, batch_size=4))).status == "finished"
    run = load_model(str(out))
    plain = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    x = run.to_tensor(run.crop(img))[None]
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(run, x), plain(x), atol=1e-5, rtol=0)


def test_unsupported_transformers_models_say_so(tmp_path):
    """A transformers Swin config is refused "model type 'swin' is not supported yet"."""
    folder = tmp_path / "swin"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "swin", "hidden_size": 32}))
    with pytest.raises(ModelLoadError, match="model type 'swin' is not supported yet"):
        load_model(str(folder))


def test_transformers_repo_from_the_hub_cache(tmp_path, photos):
    """`hf-hub:org/repo` in transformers' format, from the local HF cache (offline), converts the same way.

    `hf-hub:` repo in transformers format from a fake HF cache loads with labels and logits equal transformers'.
    """
    from pathlib import Path

    from huggingface_hub import constants

    from tests.core.test_loading import _fake_hub_cache

    reference, _ = _vit(tmp_path / "checkpoint")
    files = {p.name: p.read_bytes() for p in (tmp_path / "checkpoint").iterdir()}
    _fake_hub_cache(Path(constants.HF_HUB_CACHE), "someone/tiny-vit-transformers", files)
    loaded = load_model("hf-hub:someone/tiny-vit-transformers")
    assert loaded.labels == ["daisy", "roses", "tulips"] and loaded.kind == "transformers"
    x = loaded.to_tensor(loaded.crop(read_image(photos["coffee"])))[None]
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(loaded, x), reference(pixel_values=x).logits, atol=1e-5, rtol=0)


def test_dinov2_swiglu_fine_tunes_saves_and_reloads(tmp_path, photos, monkeypatch):
    """DINOv2 with SwiGLU (the giant layout) through `vitstudio finetune`: config.json's model_args are JSON and
    rebuild the model in plain timm (`timm.create_model(architecture, **model_args)`), and the run folder gives
    the logits of the model that was in memory when it was saved.

    [fine-tune]
    """
    import copy

    import timm
    from safetensors.torch import load_file

    from tests.core.synthetic_data import make_dataset
    from vitstudio.cli import main
    from vitstudio.core.train import engine

    _dinov2_swiglu(tmp_path / "classifier")
    saved = []
    real_save = engine.save_model_folder

    def spy(model, *args, **kwargs):
        saved.append(copy.deepcopy(model).eval())
        return real_save(model, *args, **kwargs)

    monkeypatch.setattr(engine, "save_model_folder", spy)
    data = make_dataset(tmp_path / "data", per_class=4)
    out = tmp_path / "run"
    assert main(["finetune", str(data), "--model", str(tmp_path / "classifier"), "--out", str(out), "--epochs", "1",
                 "--batch-size", "4", "--quiet"]) == 0
    assert json.loads((out / "status.json").read_text())["status"] == "finished" and saved
    config = json.loads((out / "config.json").read_text())
    args = config["model_args"]
    assert json.loads(json.dumps(args)) == args and config["architecture"] == "vit_giant_patch14_dinov2"
    plain = timm.create_model(config["architecture"], **args).eval()
    plain.load_state_dict(load_file(str(out / "model.safetensors")))
    run = load_model(str(out))
    x = run.to_tensor(run.crop(read_image(photos["rocket"])))[None]
    with torch.no_grad():
        expected = saved[-1](x)
        torch.testing.assert_close(forward_logits(run, x), expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(plain(x), expected, atol=1e-5, rtol=0)


def test_a_run_that_cannot_save_its_model_says_failed(tmp_path, monkeypatch):
    """A failure while writing the model folder ends the run with status.json saying 'failed', not 'running'.

    [fine-tune]
    """
    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.train import engine
    from vitstudio.core.train.recipes import make_config
    from vitstudio.core.train.runs import UNFINISHED, run_status

    def broken(*args, **kwargs):
        raise ValueError("Model argument 'mlp_layer' is not serializable")

    _vit(tmp_path / "checkpoint")
    monkeypatch.setattr(engine, "save_model_folder", broken)
    data = make_dataset(tmp_path / "data", per_class=4)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="not serializable"):
        drain(engine.fine_tune(make_config(str(data), str(tmp_path / "checkpoint"), str(out), "linear-probe",
                                           epochs=1, batch_size=4)))
    assert json.loads((out / "status.json").read_text())["status"] == "failed"
    assert run_status(out) == "failed" and "failed" in UNFINISHED


@pytest.mark.parametrize("family", ["vit", "deit"])
def test_headless_model_explains_and_refuses_to_predict_in_one_line(family, tmp_path, photos, capsys):
    """A headless ViTModel / DeiTModel loads for features and attention (its card says it has no classifier head);
    `predict` refuses in one line with exit 2 saying what to do instead, and so does the core path the app uses.

    [parametrised ×2]
    """
    from vitstudio.cli import main
    from vitstudio.core.analysis import attention
    from vitstudio.core.inference import NoClassifierHead, classify
    from vitstudio.core.models.modelcard import model_card

    torch.manual_seed(7)
    sizes = {k: v for k, v in SIZES.items() if k not in ("num_labels", "id2label", "label2id")}
    maker = {"vit": (transformers.ViTModel, transformers.ViTConfig),
             "deit": (transformers.DeiTModel, transformers.DeiTConfig)}[family]
    reference = maker[0](maker[1](**sizes), add_pooling_layer=False).eval()
    _jitter(reference)
    folder = tmp_path / "headless"
    reference.save_pretrained(folder)
    loaded = load_model(str(folder))
    card = model_card(loaded)
    assert card.num_classes == 0 and loaded.labels == [] and card.head.startswith("none")
    img = read_image(photos["coffee"])
    x = loaded.to_tensor(loaded.crop(img))[None]
    with torch.no_grad():
        ours = loaded.model.forward_head(loaded.model.forward_features(x), pre_logits=True)
        torch.testing.assert_close(ours, reference(pixel_values=x).last_hidden_state[:, 0], atol=1e-5, rtol=0)
    assert attention.rollout(loaded, x).shape == (1, 4, 4)
    with pytest.raises(NoClassifierHead, match="no classifier head"):
        classify(loaded, [img])
    capsys.readouterr()
    assert main(["predict", str(photos["coffee"]), "--model", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no classifier head" in err and "finetune" in err, err
