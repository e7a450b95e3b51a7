"""The catalog lists exactly timm's VisionTransformer family."""

from __future__ import annotations

import time

import timm
import torch

from vitstudio.core.models.catalog import list_catalog, vit_architectures


def _skip_weight_init(monkeypatch) -> None:
    """Weight initialisation as no-ops: on the meta device the values do not exist anyway, and initialising meta
    tensors runs through Python reference kernels (3x the time of building the 332 models, measured here). The
    entry point, not its initial values, decides the class."""
    keep = lambda tensor, *args, **kwargs: tensor  # noqa: E731
    for name in ("normal_", "uniform_", "erfinv_", "fill_", "zero_", "mul_", "add_", "clamp_", "copy_"):
        monkeypatch.setattr(torch.Tensor, name, keep)
    for name in ("trunc_normal_", "normal_", "uniform_", "zeros_", "ones_", "constant_", "xavier_uniform_",
                 "xavier_normal_", "kaiming_normal_", "kaiming_uniform_"):
        monkeypatch.setattr(torch.nn.init, name, keep)


def test_every_catalog_architecture_is_a_supported_class(monkeypatch):
    """Every architecture the catalog lists, built on the meta device (no weights allocated), is one of the
    classes ViT Studio supports, and of the class its family promises.

    >250 names incl. known ones, no deprecated aliases; every listed architecture built on the meta device (weight
    initialisation skipped: 12–17 s → 4.6 s) is a supported class and of its family's class; reference: timm's own
    classes.
    """
    import importlib

    _skip_weight_init(monkeypatch)

    from vitstudio.core.models.catalog import FAMILIES, family_of, supported_classes

    names = vit_architectures()
    assert len(names) > 250 and "deit_tiny_distilled_patch16_224" in names
    assert "vit_small_patch14_reg4_dinov2" in names and "vit_base_patch16_siglip_224" in names
    assert {"vit_small_patch16_dinov3", "eva02_large_patch14_448", "beitv2_base_patch16_224",
            "vit_relpos_base_patch16_224"} <= set(names)
    assert "vit_base_patch16_224_sam" not in names  # deprecated aliases are not listed
    classes: dict[str, tuple] = {}  # family -> its classes (Swin v1 and v2 are one family of two classes)
    for key, path in FAMILIES.values():
        cls = getattr(importlib.import_module(path.rpartition(".")[0]), path.rpartition(".")[2])
        classes[key] = classes.get(key, ()) + (cls,)
    wrong = []
    for name in names:
        model = _shallow(name)
        if not isinstance(model, supported_classes()) or not isinstance(model, classes[family_of(name)]):
            wrong.append((name, type(model).__name__))
    assert not wrong


def _shallow(name: str):
    """The entry point's model with one block per stage (the entry point, not the depth, picks the class: 6x
    faster than full depth over the whole catalog), on the meta device (no weights allocated)."""
    for shallow in ({"depth": 1}, {"depths": (1, 1, 1, 1)}, {}):
        try:
            with torch.device("meta"):
                return timm.create_model(name, **shallow)
        except (TypeError, AssertionError):  # no such argument, or one sized per block: try the next
            continue
    raise AssertionError(f"{name} could not be built")


def test_models_outside_the_families_are_not_listed():
    """Models whose attention ViT Studio does not read yet (SAM's windowed+global encoder, XCiT's cross-covariance
    attention, timm's separate Swin v2 'cr' implementation) are not in the catalog; CaiT, Swin v1/v2 and NaFlexViT
    are."""
    names = set(vit_architectures())
    for other in ("samvit_base_patch16", "xcit_tiny_12_p16_224", "swinv2_cr_tiny_ns_224"):
        assert other not in names
    for listed in ("swin_tiny_patch4_window7_224", "swinv2_tiny_window8_256", "cait_xxs24_224",
                   "naflexvit_base_patch16_gap"):
        assert listed in names


def test_catalog_tags_filter_and_speed():
    """`list_catalog` < 5 s, contains known tags, filter by substring/glob, `local_only` is exactly the bundled models
    folder, each tag has exactly one weight source (hub id xor URL).
    """
    start = time.perf_counter()
    entries = list_catalog()
    assert time.perf_counter() - start < 5
    full = {e.name for e in entries}
    assert "vit_base_patch16_224.augreg2_in21k_ft_in1k" in full
    assert "deit_base_distilled_patch16_224.fb_in1k" in full
    dino = list_catalog("dinov2")
    assert dino and all("dinov2" in e.name for e in dino)
    assert [e.name for e in list_catalog("deit_tiny_patch16_224*")] == ["deit_tiny_patch16_224.fb_in1k"]
    from vitstudio.core.files import extra_model_dirs
    from vitstudio.core.models.catalog import local_models

    # isolated, empty cache and models folder: only the source checkout's read-only models/ (the bundled demo)
    assert list_catalog(local_only=True) == [e for f in extra_model_dirs() for e in local_models(f)]
    tagged = [e for e in entries if e.tag]
    assert all(bool(e.hf_hub_id) != bool(e.url) for e in tagged)  # exactly one weight source each
