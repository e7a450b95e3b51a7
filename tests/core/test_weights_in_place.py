"""Models built around their weights (core/models/weights_in_place.py): a model folder or a hub file loads without
drawing random weights first, into exactly the model timm's own build-then-load gives; where that cannot be exact
(a buffer the model computes when built, keys or shapes that differ) timm's load runs instead. The size floor is
lowered to 0 here so the tests' tiny models take the path a real one takes."""

from __future__ import annotations

import pytest
import timm
import torch
from timm.models import save_for_hf

from vitstudio.core.models import loading, weights_in_place
from vitstudio.core.models.loading import load_model

TINY = dict(embed_dim=32, depth=2, num_heads=2, num_classes=3)
FAMILIES = {  # timm name, its tiny arguments, whether it can be built around its weights
    "class token": ("vit_base_patch16_224", dict(TINY, img_size=48), True),
    "distilled": ("deit_tiny_distilled_patch16_224", dict(TINY, img_size=48), True),
    "registers": ("vit_base_patch16_reg4_gap_256", dict(TINY, img_size=48), True),
    "dinov2": ("vit_small_patch14_dinov2", dict(TINY, img_size=42), True),
    "cait": ("cait_xxs24_224", dict(TINY, img_size=48), True),
    "swin (relative-position index)": ("swin_tiny_patch4_window7_224",
                                       dict(embed_dim=32, depths=(1, 1), num_heads=(1, 2), num_classes=3,
                                            img_size=56), False),
    "eva02 (rotary tables)": ("eva02_tiny_patch14_224", dict(img_size=42, depth=2, num_classes=3), False),
}


def _same_model(a, b) -> None:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) and sa[k].dtype == sb[k].dtype for k in sa)
    assert a.data_config == b.data_config and a.model.pretrained_cfg == b.model.pretrained_cfg
    assert [p.requires_grad for p in a.model.parameters()] == [p.requires_grad for p in b.model.parameters()]
    x = torch.randn(2, 3, *a.input_hw)
    with torch.no_grad():
        assert torch.equal(a.model.eval()(x), b.model.eval()(x))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_model_folder_loads_around_its_weights_into_timms_own_model(family, tmp_path, monkeypatch):
    """A folder saved by timm (fp16 weights, as many are published): built around its weights where the family
    allows (nothing on the meta device left, parameters fp32 as timm's copy makes them), otherwise timm's load; the
    model, its data config, its pretrained config and its logits equal to timm's build-then-load exactly."""
    arch, kwargs, in_place = FAMILIES[family]
    torch.manual_seed(0)
    save_for_hf(timm.create_model(arch, pretrained=False, **kwargs).half(), str(tmp_path), safe_serialization=True)
    monkeypatch.setattr(weights_in_place, "IN_PLACE_MIN_BYTES", 1 << 62)
    theirs = load_model(str(tmp_path), device="cpu", precision="fp32")
    monkeypatch.setattr(weights_in_place, "IN_PLACE_MIN_BYTES", 0)
    built = weights_in_place.built_with_weights(f"local-dir:{tmp_path.resolve()}", tmp_path / "model.safetensors")
    assert (built is not None) == in_place
    ours = load_model(str(tmp_path), device="cpu", precision="fp32")
    _same_model(ours, theirs)
    assert not any(t.is_meta for t in [*ours.model.parameters(), *ours.model.buffers()])


def test_a_catalog_names_hub_file_is_built_around_and_one_of_another_shape_is_left_to_timm(tmp_path, monkeypatch):
    """A catalog name's weights file from the hub (fetched here as a local file): the model is built around it,
    equal to timm's pretrained load of the same file (weights, pretrained config); a file of another head size is
    left to timm's loader (which adapts or refuses it)."""
    name = "vit_tiny_patch16_224.augreg_in21k_ft_in1k"
    monkeypatch.setattr(weights_in_place, "IN_PLACE_MIN_BYTES", 0)
    monkeypatch.setattr(loading, "hub_weight_files", lambda cfg: ("timm/x", ("model.safetensors",)))
    torch.manual_seed(0)
    own = tmp_path / "own.safetensors"
    from safetensors.torch import save_file

    save_file(timm.create_model(name, pretrained=False).state_dict(), str(own))
    monkeypatch.setattr(loading.hub, "fetch_hub_file", lambda *a, **k: str(own))
    built = []
    monkeypatch.setattr(loading, "built_with_weights",
                        lambda *a, **k: built.append(weights_in_place.built_with_weights(*a, **k)) or built[-1])
    ours = load_model(name, device="cpu", precision="fp32").model
    assert built and built[0] is not None  # built around the file, not by timm's load
    theirs = timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=str(own)))
    assert ours.pretrained_cfg == theirs.pretrained_cfg
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), theirs.state_dict().values()))
    other = tmp_path / "other.safetensors"
    save_file(timm.create_model(name, pretrained=False, num_classes=7).state_dict(), str(other))
    assert weights_in_place.built_with_weights(name, other) is None
