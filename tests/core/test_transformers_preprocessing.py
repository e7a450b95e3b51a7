"""A converted transformers model sees exactly the pixels its own image processor (the PIL backend, the reference)
gives, on real non-square photos, for each processor option the conversion accepts: a crop ratio timm's
floor(crop / crop_pct) would lose a pixel to, a non-square resize before a square crop, odd crop margins (floored by
transformers, rounded by torchvision), a non-square DINOv2 crop on portrait photos; the logits then match
transformers' own model. Options that cannot be reproduced are refused by name. transformers is dev-only."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image

from tests.core.test_transformers_format import SIZES, _jitter
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import ModelLoadError, load_model

transformers = pytest.importorskip("transformers")
PORTRAIT = ("chelsea", "coffee", "rocket")  # turned a quarter: taller than wide


def _model(family: str, image: int, patch: int):
    torch.manual_seed(5)
    sizes = {**SIZES, "image_size": image, "patch_size": patch}
    if family == "dinov2":
        model = transformers.Dinov2ForImageClassification(transformers.Dinov2Config(**{**sizes, "image_size": 56},
                                                                                     layerscale_value=0.5))
    elif family == "beit":
        model = transformers.BeitForImageClassification(transformers.BeitConfig(**sizes, layer_scale_init_value=0.5))
    elif family == "deit":
        model = transformers.DeiTForImageClassificationWithTeacher(transformers.DeiTConfig(**sizes))
    else:
        model = transformers.ViTForImageClassification(transformers.ViTConfig(**sizes))
    _jitter(model.eval())
    return model


PROCESSORS = {"vit": "ViTImageProcessorPil", "deit": "DeiTImageProcessorPil", "beit": "BeitImageProcessorPil",
              "dinov2": "BitImageProcessorPil"}


def _checkpoint(folder, family: str, image: int, patch: int, **processor):
    model = _model(family, image, patch)
    model.save_pretrained(folder)
    proc = getattr(transformers, PROCESSORS[family])(**processor)
    proc.save_pretrained(folder)
    return model, proc


def _photo(photos, name: str) -> Image.Image:
    if name.endswith("-portrait"):
        return read_image(photos[name.split("-")[0]]).transpose(Image.Transpose.ROTATE_90)
    return read_image(photos[name])


def compare(folder, model, processor, images) -> tuple[float, float, tuple]:
    """(largest pixel difference in 0-255 intensity levels, largest logit difference, input shape) of ViT Studio
    against transformers (its processor, then its model) over `images`."""
    loaded = load_model(str(folder))
    pixel, logit, shape = 0.0, 0.0, None
    std = torch.tensor(processor.image_std).view(1, 3, 1, 1)
    for img in images:
        expected = processor(images=img, return_tensors="pt")["pixel_values"]
        ours = loaded.to_tensor(loaded.crop(img))[None]
        shape = tuple(expected.shape)
        if ours.shape != expected.shape:
            return float("inf"), float("inf"), (tuple(ours.shape), shape)
        pixel = max(pixel, float(((ours - expected).abs() * std * 255).max()))
        with torch.no_grad():
            reference = model(pixel_values=expected).logits
        logit = max(logit, float((forward_logits(loaded, ours) - reference).abs().max()))
    return pixel, logit, shape


def _squash(resize, crop, resample=3):
    h, w = resize if isinstance(resize, tuple) else (resize, resize)
    return dict(size={"height": h, "width": w}, crop_size={"height": crop, "width": crop}, do_center_crop=True,
                resample=resample)


CASES = {
    # crop / resize ratios timm's floor(crop / crop_pct) turned into Resize(resize - 1)
    "ratio-118-96": ("deit", 96, 16, _squash(118, 96)),
    "ratio-450-384": ("deit", 384, 32, _squash(450, 384)),
    "ratio-462-384": ("deit", 384, 32, _squash(462, 384)),
    "ratio-472-384": ("deit", 384, 32, _squash(472, 384)),
    "ratio-501-384": ("deit", 384, 32, _squash(501, 384)),
    "ratio-753-518": ("vit", 518, 37, _squash(753, 518)),
    "ratio-772-518": ("vit", 518, 37, _squash(772, 518)),
    # a non-square resize before a square crop (flattened to 80×80 by one crop_pct)
    "squash-80x96-64": ("deit", 64, 8, _squash((80, 96), 64, resample=2)),
    # odd crop margins: transformers floors (75 - 64) / 2, torchvision rounds it
    "margin-vit-75-64": ("vit", 64, 8, _squash(75, 64)),
    "margin-deit-75-64": ("deit", 64, 8, _squash(75, 64)),
    "margin-beit-75-64": ("beit", 64, 8, _squash(75, 64)),
    "margin-dinov2-75-64": ("dinov2", 64, 8, dict(size={"shortest_edge": 75}, crop_size={"height": 64, "width": 64},
                                                   do_center_crop=True, resample=3)),
    # DINOv2's shortest edge, then a non-square crop (timm: a keep-ratio resize instead)
    "dinov2-crop-48x64": ("dinov2", 48, 8, dict(size={"shortest_edge": 64}, crop_size={"height": 48, "width": 64},
                                                do_center_crop=True, resample=3)),
}
# other resample filters and a rescale factor folded into mean/std
EXTRA = {
    "bilinear-40x32-no-crop": ("dinov2", 40, 8, dict(size={"height": 40, "width": 32}, do_center_crop=False,
                                                     resample=2)),
    "nearest": ("deit", 32, 8, _squash(45, 32, resample=0)),
    "lanczos": ("beit", 32, 8, _squash(45, 32, resample=1)),
    "box": ("vit", 32, 8, _squash(47, 32, resample=4)),
    "hamming": ("vit", 32, 8, _squash(47, 32, resample=5)),
    "rescale-no-normalize": ("vit", 32, 8, dict(size={"height": 32, "width": 32}, do_normalize=False,
                                                rescale_factor=1 / 127.5)),
}


def images_for(case: str, photos) -> list[Image.Image]:
    if case.startswith("dinov2-crop"):
        return [_photo(photos, f"{n}-portrait") for n in PORTRAIT] + [_photo(photos, "coffee")]
    return [_photo(photos, n) for n in ("chelsea", "coffee", "rocket")] + [_photo(photos, "rocket-portrait")]


@pytest.mark.parametrize("case", [*CASES, *EXTRA])
def test_pixels_and_logits_equal_transformers(case, tmp_path, photos):
    """For each accepted processor option (crop ratios, non-square resize/crop, odd margins, resample filters, rescale):
    pixels within 1e-3 levels, logits within 1e-5; reference: transformers' processor and model. [parametrised ×19]
    """
    family, image, patch, options = {**CASES, **EXTRA}[case]
    model, processor = _checkpoint(tmp_path / "checkpoint", family, image, patch, **options)
    pixel, logit, shape = compare(tmp_path / "checkpoint", model, processor, images_for(case, photos))
    # the same PIL resize, crop window and arithmetic: equal up to float32 rounding (no intensity level apart)
    assert pixel < 1e-3, (case, pixel, shape)
    assert logit <= 1e-5, (case, logit)


def test_exact_preprocessing_everywhere(tmp_path, photos):
    """The folder path (crops read by threads) and the tensor decoder's choice use the same exact steps.

    Such a model uses the PIL path (tensor decoder unsupported), card names the processor resize, `classify_files` top
    prob equals transformers'.
    """
    from vitstudio.core.data import tensor_decode
    from vitstudio.core.inference import classify_files
    from vitstudio.core.models.modelcard import model_card

    model, processor = _checkpoint(tmp_path / "checkpoint", "deit", 64, 8, **_squash((80, 96), 64, resample=2))
    loaded = load_model(str(tmp_path / "checkpoint"))
    assert not tensor_decode.supports(loaded.data_config)  # the PIL path: the exact reference
    assert model_card(loaded).crop_mode.startswith("transformers processor: resize to 80×96")
    img = read_image(photos["rocket"])
    with torch.no_grad():
        probs = model(**processor(images=img, return_tensors="pt")).logits.softmax(-1)[0]
    (pred,) = [p for batch in classify_files(loaded, [photos["rocket"]], topk=3) for p in batch]
    assert abs(pred.probs[0] - float(probs.max())) < 1e-5


@pytest.mark.parametrize("options, named", [
    (dict(do_resize=False), "do_resize"),
    (dict(size={"shortest_edge": 32, "longest_edge": 64}, do_center_crop=True, crop_size=32), "longest_edge"),
    (dict(size={"height": 30, "width": 30}, do_center_crop=True, crop_size={"height": 32, "width": 32}),
     "crop_size 32×32 is larger"),
    (dict(size={"height": 32, "width": 32}, do_pad=True), "do_pad"),
    (dict(size={"height": 32, "width": 32}, resample=7), "resample"),
])
def test_options_that_cannot_be_reproduced_are_refused_by_name(options, named, tmp_path):
    """do_resize=False, longest_edge, crop larger than resize, do_pad, unknown resample raise ModelLoadError naming the
    option. [parametrised ×5]
    """
    folder = tmp_path / "checkpoint"
    _model("vit", 32, 8).save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "ViTImageProcessor",
                                                                 **options}))
    with pytest.raises(ModelLoadError, match=named):
        load_model(str(folder))


def test_a_fine_tuned_run_keeps_the_exact_preprocessing(tmp_path, photos):
    """The run folder records the processor's resize (config.json, under `vitstudio`): reloaded, the run sees the
    pixels its validation saw during training, the processor's own; plain timm still reads its crop_pct.

    [fine-tune]
    """
    import timm

    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    _, processor = _checkpoint(tmp_path / "checkpoint", "deit", 64, 8, **_squash((80, 96), 64, resample=2))
    data = make_dataset(tmp_path / "data", per_class=4)
    out = tmp_path / "run"
    assert drain(fine_tune(make_config(str(data), str(tmp_path / "checkpoint"), str(out), "linear-probe",
                                       epochs=1, batch_size=4))).status == "finished"
    run = load_model(str(out))
    assert run.data_config["hf_size"] == {"height": 80, "width": 96}
    for name in ("rocket", "chelsea"):
        img = read_image(photos[name])
        expected = processor(images=img, return_tensors="pt")["pixel_values"]
        torch.testing.assert_close(run.to_tensor(run.crop(img))[None], expected, atol=1e-5, rtol=0)
    assert timm.create_model(f"local-dir:{out}", pretrained=True).pretrained_cfg["crop_mode"] == "squash"
