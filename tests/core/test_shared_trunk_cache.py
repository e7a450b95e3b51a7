"""Models with the same image tower share one folder-embedding cache: the features are the tower's, each model's
logits come from them through its own head. A quick run used right after it was fitted, or a CLIP-style model given
other classes, opens a folder without running a single image through the model again; the logits equal the
model's own forward. Models whose logits are not the head on the pooled features keep theirs in the cache."""

from __future__ import annotations

import numpy as np
import torch

from tests.core.generators import drain
from tests.core.synthetic_data import make_dataset
from vitstudio.core.data.images import read_image
from vitstudio.core.folder.embedcache import EmbeddingCache, embed_folder, head_on_pooled
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.zeroshot import with_classes
from vitstudio.core.train.engine import fine_tune
from vitstudio.core.train.recipes import make_config


def _forward_logits(loaded, paths):
    x = torch.stack([loaded.to_tensor(loaded.crop(read_image(p))) for p in paths])
    with torch.no_grad():
        return loaded.model(x).numpy()


def test_a_quick_run_reads_its_base_models_cached_features(tmp_path):
    """A quick run of the demo shares the demo's cache folder, computes 0 images, features identical, logits equal its
    own forward, labels its own. [fine-tune]
    """
    data = make_dataset(tmp_path / "data", per_class=8, size=32)
    base = load_model(str(bundled_demo()))
    first = drain(embed_folder(base, [str(data)]))
    assert first.computed == 24
    out = tmp_path / "run"
    drain(fine_tune(make_config(data, str(bundled_demo()), out, "quick", epochs=5, device="cpu")))
    run = load_model(str(out))
    assert EmbeddingCache(run).folder == EmbeddingCache(base).folder  # one tower, one cache
    again = drain(embed_folder(run, [str(data)]))
    assert again.computed == 0  # not one image through the model again
    np.testing.assert_allclose(np.asarray(again.logits[again.rows]), _forward_logits(run, again.paths), atol=1e-5)
    np.testing.assert_array_equal(again.features_of(), first.features_of())
    assert again.labels == ("blue", "green", "red") and first.labels == tuple(base.labels)


def test_a_clip_model_under_other_classes_shares_its_features(tmp_path):
    """A CLIP model with other classes computes 0 images and its logits equal its own forward."""
    from tests.core.test_openclip import CLIP_CFG, _build

    folder = _build(CLIP_CFG, tmp_path / "clip", safetensors=True)
    data = make_dataset(tmp_path / "data", per_class=4, size=40)
    plain = load_model(str(folder))
    animals = with_classes(plain, ["a cat", "a dog"], "{}")
    drinks = with_classes(plain, ["coffee", "tea", "water"], "{}")
    assert drain(embed_folder(animals, [str(data)])).computed == 12
    result = drain(embed_folder(drinks, [str(data)]))
    assert result.computed == 0 and result.labels == ("coffee", "tea", "water")
    np.testing.assert_allclose(np.asarray(result.logits[result.rows]), _forward_logits(drinks, result.paths),
                               atol=1e-5)


def test_other_heads_keep_their_logits_in_the_cache():
    """`head_on_pooled` is None for a distilled (two-head) DeiT and the head for a plain ViT."""
    import timm

    distilled = timm.create_model("deit_tiny_distilled_patch16_224", pretrained=False, num_classes=3)
    assert head_on_pooled(distilled) is None  # two heads averaged: not the head on the pooled features
    plain = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=3)
    assert head_on_pooled(plain) is plain.head


def test_folder_results_do_not_keep_the_model_alive(tmp_path):
    """The logits come from the head on demand, but the results hold the head and the lock, not the model: a
    Folder tab showing them never keeps a model the app has let go of."""
    import gc
    import weakref

    data = make_dataset(tmp_path / "data", per_class=2, size=32)
    loaded = load_model(str(bundled_demo()))
    result = drain(embed_folder(loaded, [str(data)]))
    model = weakref.ref(loaded.model)
    del loaded
    gc.collect()
    assert model() is None
    assert np.asarray(result.logits[result.rows]).shape == (6, 10)  # and the results still work
