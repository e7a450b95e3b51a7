"""The catalog lists exactly timm's VisionTransformer family."""

from __future__ import annotations

import time

import timm
import torch

from vitstudio.core.models.catalog import list_catalog, vit_architectures


def test_every_listed_architecture_is_a_vision_transformer():
    from timm.models.vision_transformer import VisionTransformer

    names = vit_architectures()
    assert len(names) > 150 and "deit_tiny_distilled_patch16_224" in names
    assert "vit_small_patch14_reg4_dinov2" in names and "vit_base_patch16_siglip_224" in names
    assert "vit_base_patch16_224_sam" not in names  # deprecated aliases are not listed
    wrong = []
    for name in names[::5] + [n for n in names if n.startswith(("deit", "vitamin", "vit_tiny_r"))]:
        with torch.device("meta"):  # builds the module tree without allocating weights
            model = timm.create_model(name)
        if not isinstance(model, VisionTransformer):
            wrong.append((name, type(model).__name__))
    assert not wrong


def test_no_vision_transformer_is_missed():
    """Models from other modules that people may think of as ViTs are not VisionTransformer instances."""
    from timm.models.vision_transformer import VisionTransformer

    names = set(vit_architectures())
    for other in ("eva02_tiny_patch14_224", "beit_base_patch16_224", "vit_relpos_base_patch16_224",
                  "samvit_base_patch16"):
        with torch.device("meta"):
            model = timm.create_model(other)
        assert other not in names and not isinstance(model, VisionTransformer)


def test_catalog_tags_filter_and_speed():
    start = time.perf_counter()
    entries = list_catalog()
    assert time.perf_counter() - start < 5
    full = {e.name for e in entries}
    assert "vit_base_patch16_224.augreg2_in21k_ft_in1k" in full
    assert "deit_base_distilled_patch16_224.fb_in1k" in full
    dino = list_catalog("dinov2")
    assert dino and all("dinov2" in e.name for e in dino)
    assert [e.name for e in list_catalog("deit_tiny_patch16_224*")] == ["deit_tiny_patch16_224.fb_in1k"]
    assert list_catalog(local_only=True) == []  # isolated, empty cache and models/ folder
    tagged = [e for e in entries if e.tag]
    assert all(bool(e.hf_hub_id) != bool(e.url) for e in tagged)  # exactly one weight source each
