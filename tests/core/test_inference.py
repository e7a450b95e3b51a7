"""Classification equals timm's own forward on timm's own preprocessing."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import timm
import torch

from tests.conftest import TINY_SPEC
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import classify, classify_files, forward_logits, write_csv
from vitstudio.core.models.loading import load_model


def _timm_reference_logits(model, img):
    """What a timm user writes: resolve the data config, build the eval transform, call the model."""
    cfg = timm.data.resolve_model_data_config(model)
    cfg["input_size"] = (3, *model.patch_embed.img_size)  # as timm's scripts do with --input-size
    transform = timm.data.create_transform(**cfg, is_training=False)
    with torch.no_grad():
        return model(transform(img).unsqueeze(0))[0]


def test_logits_equal_timm_forward_named_architecture(tmp_path, photos):
    """`vit_tiny_patch16_224 --weights`: logits, top-3 indices and probs equal timm's own forward with its eval
    transform; the shown crop is 224×224 uint8; reference: timm's own forward.
    """
    from safetensors.torch import save_file

    torch.manual_seed(1)
    ref = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=7).eval()
    save_file(ref.state_dict(), str(tmp_path / "w.safetensors"))
    loaded = load_model("vit_tiny_patch16_224", weights=tmp_path / "w.safetensors", device="cpu")
    img = read_image(photos["astronaut"])
    ours = forward_logits(loaded, loaded.to_tensor(loaded.crop(img))[None])[0]
    torch.testing.assert_close(ours, _timm_reference_logits(ref, img), atol=1e-5, rtol=0)
    pred = classify(loaded, [img], topk=3)[0]
    ref_probs = _timm_reference_logits(ref, img).softmax(-1)
    assert list(pred.indices) == ref_probs.topk(3).indices.tolist()
    np.testing.assert_allclose(pred.probs, ref_probs.topk(3).values.numpy(), atol=1e-6)
    # the crop shown is the one the model saw: 224x224 (bicubic resize to 248, centre crop)
    assert pred.crop.shape == (224, 224, 3) and pred.crop.dtype == np.uint8


def test_batch_equals_single_and_topk_sorted(tiny_weights, photos):
    """Batched classify equals per-image; top-k sorted descending and sums to 1 for all classes."""
    path, _ = tiny_weights
    loaded = load_model(TINY_SPEC, weights=path)
    imgs = [read_image(p) for p in photos.values()]
    batch = classify(loaded, imgs, topk=5)
    for img, pred in zip(imgs, batch):
        single = classify(loaded, [img], topk=5)[0]
        assert single.indices == pred.indices
        np.testing.assert_allclose(single.probs, pred.probs, atol=1e-6)
        assert list(pred.probs) == sorted(pred.probs, reverse=True)
        assert abs(sum(pred.probs) - 1) < 1e-5  # 5 classes, top-5 covers all


def test_classify_files_reports_errors_and_goes_on(tiny_weights, photos, tmp_path):
    """`classify_files` keeps input order, marks bad/missing files with reasons, top-1 matches timm's reference; errors
    don't count toward batch size.
    """
    path, model = tiny_weights
    loaded = load_model(TINY_SPEC, weights=path)
    bad = tmp_path / "bad.jpg"
    bad.write_text("not an image")
    inputs = [photos["astronaut"], bad, photos["coffee"], tmp_path / "missing.png", photos["rocket"]]
    batches = list(classify_files(loaded, inputs, topk=2, batch_size=2))
    results = [r for b in batches for r in b]
    assert [r.path for r in results] == [str(p) for p in inputs]
    assert [r.ok for r in results] == [True, False, True, False, True]
    assert "not an image" in results[1].error and "not found" in results[3].error
    ref = _timm_reference_logits(model, read_image(photos["coffee"])).softmax(-1)
    assert results[2].indices[0] == int(ref.argmax())
    assert len(batches) == 2  # two good images fill a batch; errors do not count toward it


def test_csv_output(tiny_weights, photos, tmp_path):
    """`write_csv` rows: path, empty error, label_1/prob_1 for a good file; error and empty labels for a bad one."""
    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    bad = tmp_path / "x.png"
    bad.write_bytes(b"")
    results = [r for b in classify_files(loaded, [photos["chelsea"], bad], topk=3) for r in b]
    buf = io.StringIO()
    write_csv(results, buf, 3)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert rows[0]["path"] == str(photos["chelsea"]) and rows[0]["error"] == ""
    assert rows[0]["label_1"] == results[0].labels[0]
    assert abs(float(rows[0]["prob_1"]) - results[0].probs[0]) < 1e-6
    assert rows[1]["error"] and rows[1]["label_1"] == ""


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_runs_and_stays_close(tiny_weights, photos, precision):
    """bf16/fp16 top-1 prob within 0.05 of fp32. [parametrised ×2]"""
    fp32 = load_model(TINY_SPEC, weights=tiny_weights[0])
    low = load_model(TINY_SPEC, weights=tiny_weights[0], precision=precision)
    img = read_image(photos["astronaut"])
    a = classify(fp32, [img])[0]
    b = classify(low, [img])[0]
    np.testing.assert_allclose(a.probs[0], b.probs[0], atol=0.05)
