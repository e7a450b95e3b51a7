"""The ViT families beyond VisionTransformer: EVA-02 (RoPE, SwiGLU), DINOv3 (RoPE + 4 registers), BEiT (relative
position bias), relative-position ViTs (with and without a class token) and NaFlexViT (4 registers, no class token,
a position table resampled to the image's grid). Each tiny random config loads the way a
downloaded one would (a timm model folder), predicts like timm's own forward with timm's transform, and every
attention analysis equals a float64 transcription of its formula over attention maps extracted independently, by
timm's own `AttentionExtract` (FX graph of the softmax nodes), where RoPE and the relative-position bias are inside
the softmax the model applied."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from timm.models import save_for_hf
from timm.utils import AttentionExtract

from tests.core.reference_vit import ref_distance_entropy, ref_head_maps, ref_rollout, sharpen
from vitstudio.core.analysis import attention as A
from vitstudio.core.analysis import embeddings as E
from vitstudio.core.analysis.capture import attention_modules
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.catalog import family_of, list_catalog
from vitstudio.core.models.loading import load_model

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
# family case -> (timm entry point, prefix tokens, has a class token)
CASES = {
    "dinov3": ("vit_small_patch16_dinov3", 5, True),
    "eva02": ("eva02_tiny_patch14_224", 1, True),
    "beit": ("beit_base_patch16_224", 1, True),
    "relpos": ("vit_relpos_small_patch16_224", 0, False),
    "relpos-cls": ("vit_relpos_base_patch16_cls_224", 1, True),
    "naflexvit": ("naflexvit_base_patch16_gap", 4, False),  # 4 registers, no class token, mean pooling
}


@pytest.fixture(scope="module", params=list(CASES))
def family(request, tmp_path_factory):
    arch, prefix, has_cls = CASES[request.param]
    torch.manual_seed(0)
    # NaFlexViT's folder records a 48-px input (6×6 grid, resampled from its 4×4 table): timm's default 384 px would
    # make every analysis run on 2,304 patches. DINOv3 (dynamic size) likewise: its default 256 px ran its RoPE on a
    # 32×32 grid (1,029 tokens; its float64 references took ~2.5 s); 48 px still is a grid it was not built for
    overlay = dict(pretrained_cfg_overlay=dict(input_size=(3, 48, 48))) if request.param in ("naflexvit", "dinov3") \
        else {}
    model = sharpen(timm.create_model(arch, pretrained=False, **TINY, **overlay), scale=0.6)
    folder = tmp_path_factory.mktemp(request.param)
    save_for_hf(model, str(folder), safe_serialization=True)  # as a hub download or a run folder looks
    return request.param, folder, prefix, has_cls


def _reference(folder):
    """timm's own model from the same folder, with its attention readable by AttentionExtract."""
    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    for module in model.modules():
        if hasattr(module, "fused_attn"):
            module.fused_attn = False
    return model


def _extract(model, x):
    maps = AttentionExtract(model, method="fx")(x)
    return [maps[k].detach().double().numpy() for k in sorted(maps, key=lambda k: int(k.split(".")[1]))]


def test_loads_and_predicts_like_timm(family, photos):
    """Prefix-token count and kind; family names; logits equal timm's own forward with timm's transform. [parametrised
    ×6]
    """
    case, folder, prefix, _ = family
    loaded = load_model(str(folder))
    assert loaded.num_prefix_tokens == prefix and loaded.kind == "timm"
    assert family_of(CASES[case][0]) in {"eva", "beit", "relpos", "naflexvit"}
    img = read_image(photos["chelsea"])
    ref = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    transform = timm.data.create_transform(**timm.data.resolve_model_data_config(ref))
    with torch.no_grad():
        expected = ref(transform(img)[None])
    torch.testing.assert_close(forward_logits(loaded, loaded.to_tensor(loaded.crop(img))[None]), expected,
                               atol=1e-5, rtol=0)


def test_attention_analyses_equal_the_formulas(family, photos):
    """Head maps, rollout, token maps, distance/entropy equal reference_vit formulas over timm AttentionExtract (FX)
    maps; gradient rollout finite; logits and fused flags restored. [parametrised ×6]
    """
    case, folder, prefix, has_cls = family
    loaded = load_model(str(folder))
    imgs = [read_image(photos[n]) for n in ("astronaut", "coffee")]
    x = torch.stack([loaded.to_tensor(loaded.crop(i)) for i in imgs])  # batch 2
    attns = _extract(_reference(folder), x)
    grid, n = loaded.grid_size, attns[0].shape[-1]
    assert n == prefix + grid[0] * grid[1]
    before = forward_logits(loaded, x)
    for layer in range(loaded.depth):
        np.testing.assert_allclose(A.head_maps(loaded, x, layer), ref_head_maps(attns[layer], prefix, has_cls, grid),
                                   atol=1e-5)
    for fusion, discard in (("mean", 0.0), ("max", 0.5)):
        np.testing.assert_allclose(A.rollout(loaded, x, fusion, discard),
                                   ref_rollout(attns, prefix, has_cls, grid, fusion, discard), atol=1e-5)
    patch = (1, 2)
    idx = prefix + patch[0] * grid[1] + patch[1]
    maps = A.token_maps(loaded, x, patch)
    for layer, a in enumerate(attns):
        np.testing.assert_allclose(maps.attends_to[:, layer], a[:, :, idx, prefix:].reshape(2, -1, *grid), atol=1e-5)
        np.testing.assert_allclose(maps.attended_by[:, layer], a[:, :, prefix:, idx].reshape(2, -1, *grid),
                                   atol=1e-5)
    stats = A.attention_stats(loaded, x)
    distance, entropy = ref_distance_entropy(attns, prefix, grid, loaded.patch_size)
    np.testing.assert_allclose(stats.distance, distance, rtol=1e-5)
    np.testing.assert_allclose(stats.entropy, entropy, rtol=1e-4)
    gradient = A.gradient_rollout(loaded, x)
    assert gradient.maps.shape == (2, *grid) and np.isfinite(gradient.maps).all()
    # the analyses leave predictions and the fused-attention switches as they were
    torch.testing.assert_close(forward_logits(loaded, x), before, atol=1e-6, rtol=0)
    assert all(m.fused_attn for b in loaded.model.blocks for m in attention_modules(b))


def test_embeddings(family, photos):
    """Last-layer patch tokens equal timm's forward_intermediates; prefix width; PCA RGB shape. [parametrised ×6]"""
    _, folder, prefix, _ = family
    loaded = load_model(str(folder))
    x = loaded.to_tensor(loaded.crop(read_image(photos["rocket"])))[None]
    tokens = E.layer_tokens(loaded, x)
    ref = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    with torch.no_grad():
        final, inter = ref.forward_intermediates(x, indices=[loaded.depth - 1], return_prefix_tokens=prefix > 0,
                                                 norm=False, output_fmt="NLC")
    patches, _prefix = inter[0] if isinstance(inter[0], tuple) else (inter[0], None)
    gh, gw = loaded.grid_size
    np.testing.assert_allclose(tokens[loaded.depth - 1].patches.reshape(1, gh * gw, -1), patches.numpy(), atol=1e-5)
    assert tokens[0].prefix.shape[1] == prefix
    rgb, _ = E.pca_rgb(tokens[1].patches)
    assert rgb.shape == (1, gh, gw, 3)


def test_catalog_lists_the_families():
    """`list_catalog(family=…)` includes known EVA/BEiT/relpos/CaiT/Swin tags and only that family; unknown family
    raises.
    """
    for family, example in (("eva", "vit_small_patch16_dinov3.lvd1689m"),
                            ("eva", "eva02_base_patch14_448.mim_in22k_ft_in22k_in1k"),
                            ("beit", "beitv2_base_patch16_224.in1k_ft_in22k_in1k"),
                            ("relpos", "vit_relpos_base_patch16_clsgap_224.sw_in1k"),
                            ("cait", "cait_s24_224.fb_dist_in1k"), ("swin", "swin_tiny_patch4_window7_224.ms_in1k"),
                            ("swin", "swinv2_base_window12to24_192to384.ms_in22k_ft_in1k")):
        names = {e.name for e in list_catalog(family=family)}
        assert example in names, (family, example)
        assert all(e.family == family for e in list_catalog(family=family))
    with pytest.raises(ValueError, match="Unknown family"):
        list_catalog(family="swinv2_cr")


def test_fine_tunes_and_loads_back(family, tmp_path, photos):
    """A family model fine-tunes (last-blocks: head, final norm and last blocks) and its run folder loads back in
    ViT Studio and plain timm with the same logits.

    Last-blocks fine-tune finishes; the run loads with labels and the same class, and with the same logits as plain timm
    `local-dir:`. [parametrised ×6] [fine-tune]
    """
    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    case, folder, _, _ = family
    data = make_dataset(tmp_path / "data", per_class=4)
    out = tmp_path / "run"
    config = make_config(str(data), str(folder), str(out), "last-blocks", epochs=1, batch_size=4, drop_path=0.1,
                         img_size=32)
    assert drain(fine_tune(config)).status == "finished"
    loaded = load_model(str(out))
    assert loaded.labels == ["blue", "green", "red"]
    assert type(loaded.model) is type(load_model(str(folder)).model)
    x = loaded.to_tensor(loaded.crop(read_image(photos["coffee"])))[None]
    plain = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(loaded, x), plain(x), atol=1e-5, rtol=0)


def test_analyses_that_do_not_apply_say_why(family, photos, tmp_path):
    """No learned position embedding for RoPE / relative-position models: refused before any work, with the reason,
    by explain() and by the CLI (exit 2).

    The eight core analyses apply; pos-embed refused (rotary / relative position bias) by explain and CLI exit 2,
    NaFlexViT refuses filters and pos-embed; EVA-02 keeps pos-embed. [parametrised ×6]
    """
    from vitstudio.cli import main
    from vitstudio.core.analysis.applicability import available
    from vitstudio.core.analysis.explain import explain

    case, folder, _, _ = family
    loaded = load_model(str(folder))
    reasons = available(loaded.model)
    applicable = {m for m, why in reasons.items() if why is None}
    assert {"heads", "rollout", "gradient-rollout", "token", "distance", "pca", "similarity", "norms"} <= applicable
    if case == "naflexvit":  # a linear projection of flattened patches and a table resampled to each image's grid
        assert "linear projection" in reasons["filters"] and "resamples its position table" in reasons["pos-embed"]
        assert main(["explain", "--model", str(folder), "--method", "filters", "--out", str(tmp_path / "f.png")]) \
            == 2
        return
    assert "filters" in applicable
    if case in ("dinov3", "beit", "relpos", "relpos-cls"):
        scheme = "rotary" if case == "dinov3" else "relative position bias"
        assert scheme in reasons["pos-embed"]
        with pytest.raises(ValueError, match="does not apply to this model.*no learned position embedding"):
            explain(loaded, "pos-embed")
        assert main(["explain", "--model", str(folder), "--method", "pos-embed", "--out", str(tmp_path / "p.png")]) \
            == 2
    else:  # EVA-02 has RoPE *and* a learned absolute position embedding
        assert reasons["pos-embed"] is None
