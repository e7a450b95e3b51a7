"""Attention analyses against independent implementations of the published formulas, on every layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.core.reference_vit import (
    np_attn,
    ref_distance_entropy,
    ref_gradient_rollout,
    ref_head_maps,
    ref_rollout,
    reference_forward,
    sharpen,
    wrap,
)
from vitstudio.core.analysis import attention as A
from vitstudio.core.analysis.capture import AttentionUnsupported, attention_modules
from vitstudio.core.inference import forward_logits

BASE = dict(patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=5)


def _make(layout: str):
    from timm.models.deit import VisionTransformerDistilled
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    if layout == "cls":
        model, hw = VisionTransformer(img_size=32, **BASE), (32, 32)
    elif layout == "distilled":
        model, hw = VisionTransformerDistilled(img_size=32, **BASE), (32, 32)
    elif layout == "registers":
        model, hw = VisionTransformer(img_size=32, reg_tokens=4, no_embed_class=True, **BASE), (32, 32)
    elif layout == "nonsquare":  # 24x40 input, 3x5 grid
        model, hw = VisionTransformer(img_size=(24, 40), **BASE), (24, 40)
    elif layout == "dynamic":  # trained at 32x32, fed 24x40: pos-embed resampled, 3x5 grid
        model, hw = VisionTransformer(img_size=32, dynamic_img_size=True, **BASE), (24, 40)
    elif layout == "gap":  # no class token, global average pooling
        model, hw = VisionTransformer(img_size=32, class_token=False, global_pool="avg", **BASE), (32, 32)
    else:
        raise ValueError(layout)
    return wrap(sharpen(model), hw)


LAYOUTS = {"cls": 1, "distilled": 2, "registers": 5, "nonsquare": 1, "dynamic": 1, "gap": 0}


@pytest.fixture(params=list(LAYOUTS))
def case(request):
    loaded = _make(request.param)
    torch.manual_seed(1)
    x = torch.randn(2, 3, *loaded.input_hw)  # batch 2 everywhere
    with torch.no_grad():
        logits, attns, _ = reference_forward(loaded.model, x)
    return request.param, loaded, x, logits, np_attn(attns)


def _grid(loaded):
    return loaded.grid_size


def test_prefix_tokens_and_reference_forward_agree(case):
    """Prefix-token count per layout; our logits equal a hand-written forward; attention shape (B, H, N, N); reference:
    reference_vit.reference_forward. [parametrised ×6]
    """
    layout, loaded, x, ref_logits, attns = case
    assert loaded.num_prefix_tokens == LAYOUTS[layout]
    torch.testing.assert_close(forward_logits(loaded, x), ref_logits.float(), atol=1e-5, rtol=0)
    n = LAYOUTS[layout] + int(np.prod(_grid(loaded)))
    assert attns[0].shape == (2, 2, n, n)


def test_capture_keeps_logits_and_fused_flags(case):
    """Captured maps equal the reference softmax(q·kᵀ/√d) (fp16 tolerance); fused_attn flags restored; logits unchanged;
    `layers=[-1]` captures only the last layer. [parametrised ×6]
    """
    _, loaded, x, _, attns = case
    before = forward_logits(loaded, x)
    maps = A.attention_maps(loaded, x)
    for layer, ref in enumerate(attns):
        np.testing.assert_allclose(maps[layer].astype(np.float64), ref, atol=2e-3)  # stored as float16
    assert all(m.fused_attn for b in loaded.model.blocks for m in attention_modules(b))  # restored
    torch.testing.assert_close(forward_logits(loaded, x), before, atol=1e-5, rtol=0)
    only = A.attention_maps(loaded, x, layers=[-1])
    assert list(only) == [2]


def test_head_maps(case):
    """Per-head maps of first and last layer (class row, or mean over queries for GAP); reference: ref_head_maps
    formula. [parametrised ×6]
    """
    layout, loaded, x, _, attns = case
    for layer in (0, -1):
        ours = A.head_maps(loaded, x, layer)
        ref = ref_head_maps(attns[layer], LAYOUTS[layout], layout != "gap", _grid(loaded))
        np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_token_maps(case):
    """A patch's attends-to / attended-by maps per layer equal rows/columns of the reference attention; a patch outside
    the grid raises ValueError. [parametrised ×6]
    """
    layout, loaded, x, _, attns = case
    gh, gw = _grid(loaded)
    row, col = gh - 1, gw // 2
    p = LAYOUTS[layout]
    q = p + row * gw + col
    maps = A.token_maps(loaded, x, (row, col))
    for layer, a in enumerate(attns):
        np.testing.assert_allclose(maps.attends_to[:, layer], a[:, :, q, p:].reshape(2, 2, gh, gw), atol=1e-5)
        np.testing.assert_allclose(maps.attended_by[:, layer], a[:, :, p:, q].reshape(2, 2, gh, gw), atol=1e-5)
    with pytest.raises(ValueError, match="outside"):
        A.token_maps(loaded, x, (gh, 0))


@pytest.mark.parametrize("fusion, discard", [("mean", 0.0), ("max", 0.0), ("min", 0.0), ("mean", 0.9), ("max", 0.5)])
def test_rollout(case, fusion, discard):
    """Attention rollout with mean/max/min fusion and discard ratios; reference: ref_rollout (Abnar & Zuidema,
    row-normalised). [parametrised ×30: 6 layouts × 5 fusion/discard]
    """
    layout, loaded, x, _, attns = case
    ours = A.rollout(loaded, x, fusion=fusion, discard=discard)
    ref = ref_rollout(attns, LAYOUTS[layout], layout != "gap", _grid(loaded), fusion, discard)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_rollout_is_row_normalised_not_vit_explain():
    """Row and column normalisation differ here, so copying vit-explain's mistake would fail the test above.

    Row- and column-normalised rollout differ on this model, and ours matches the row-normalised one (not vit-explain's
    column bug); reference: ref_rollout.
    """
    loaded = _make("cls")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        attns = np_attn(reference_forward(loaded.model, x)[1])
    right = ref_rollout(attns, 1, True, (4, 4), "max", 0.5)
    wrong = ref_rollout(attns, 1, True, (4, 4), "max", 0.5, column_bug=True)
    assert np.abs(right - wrong).max() > 1e-2
    np.testing.assert_allclose(A.rollout(loaded, x, "max", 0.5), right, atol=1e-5)


def test_discard_never_zeroes_the_cls_self_entry():
    """`discard_smallest` keeps entry [0,0] even when it is the smallest, and zeroes exactly ⌊0.5·25⌋ others."""
    fused = torch.rand(1, 5, 5)
    fused[0, 0, 0] = -1.0  # the smallest entry of all
    out = A.discard_smallest(fused, 0.5)
    assert out[0, 0, 0] == -1.0 and int((out == 0).sum()) == 12  # ⌊0.5·25⌋ others zeroed


def test_gradient_rollout(case):
    """Chefer-style gradient rollout for the top class and its reported targets; reference: ref_gradient_rollout over
    autograd gradients of the hand-written forward. [parametrised ×6]
    """
    layout, loaded, x, _, _ = case
    logits, attns, _ = reference_forward(loaded.model, x, keep_grad=True)
    targets = logits.argmax(-1)
    logits.gather(1, targets[:, None]).sum().backward()
    ref = ref_gradient_rollout(np_attn(attns), [a.grad.double().numpy() for a in attns], LAYOUTS[layout],
                               layout != "gap", _grid(loaded))
    ours = A.gradient_rollout(loaded, x)
    assert ours.targets == tuple(targets.tolist())
    np.testing.assert_allclose(ours.maps, ref, atol=1e-5)
    loaded.model.zero_grad(set_to_none=True)


def test_gradient_rollout_per_image_class():
    """Gradient rollout with a per-image target list (distilled model) matches the reference; an out-of-range target
    raises "Target class".
    """
    loaded = _make("distilled")
    x = torch.randn(2, 3, 32, 32)
    logits, attns, _ = reference_forward(loaded.model, x, keep_grad=True)
    targets = torch.tensor([3, 1])
    logits.gather(1, targets[:, None]).sum().backward()
    ref = ref_gradient_rollout(np_attn(attns), [a.grad.double().numpy() for a in attns], 2, True, (4, 4))
    ours = A.gradient_rollout(loaded, x, target=[3, 1])
    assert ours.targets == (3, 1)
    np.testing.assert_allclose(ours.maps, ref, atol=1e-5)
    with pytest.raises(ValueError, match="Target class"):
        A.gradient_rollout(loaded, x, target=9)


def test_distance_and_entropy(case):
    """Mean attention distance (px) and entropy per layer and head; reference: ref_distance_entropy formula.
    [parametrised ×6]
    """
    layout, loaded, x, _, attns = case
    gh, gw = _grid(loaded)
    stats = A.attention_stats(loaded, x)
    dist, ent = ref_distance_entropy(attns, LAYOUTS[layout], (gh, gw), (8, 8))
    assert stats.distance.shape == (3, 2)
    np.testing.assert_allclose(stats.distance, dist, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(stats.entropy, ent, rtol=1e-5, atol=1e-5)


def test_layer_bounds_and_unsupported_blocks():
    """Out-of-range layer raises, negative layer works; parallel-attention blocks give concatenated heads for head maps
    and raise AttentionUnsupported for gradient rollout.
    """
    loaded = _make("cls")
    x = torch.randn(1, 3, 32, 32)
    with pytest.raises(ValueError, match="out of range"):
        A.head_maps(loaded, x, 3)
    assert A.head_maps(loaded, x, -3).shape == (1, 2, 4, 4)

    import timm

    parallel = wrap(timm.create_model("vit_base_patch16_18x2_224", img_size=32, patch_size=8, embed_dim=32,
                                      depth=2, num_heads=2, num_classes=5), (32, 32))
    # two parallel attention branches per block: their heads are concatenated
    assert A.head_maps(parallel, x, 0).shape == (1, 4, 4, 4)
    with pytest.raises(AttentionUnsupported):
        A.gradient_rollout(parallel, x)


@pytest.mark.parametrize("name", ["vit_base_patch16_xp_224", "vit_pwee_patch16_reg1_gap_256",
                                  "vit_base_patch16_rpn_224", "vit_dlittle_patch16_reg1_gap_256",
                                  "vit_dpwee_patch16_reg1_gap_256"])
def test_other_block_types(name):
    """Parallel-scaling, post-norm and differential-attention blocks: one map per head, logits untouched.

    parallel-scaling, post-norm and differential-attention timm blocks: one map per head, rows sum to 1 (or 1−λ for
    differential), rollout shape, logits untouched. [parametrised ×5]
    """
    import timm

    loaded = wrap(timm.create_model(name, img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2,
                                    num_classes=5), (32, 32))
    x = torch.randn(1, 3, 32, 32)
    before = forward_logits(loaded, x)
    maps = A.attention_maps(loaded, x)
    assert maps[0].shape[1] == 2  # heads, not 2·heads for differential attention
    rows = maps[1].astype(np.float64).sum(-1)
    module = attention_modules(loaded.model.blocks[1])[0]
    if hasattr(module, "_compute_lambda"):  # a0 − λ·a1 of two softmaxes: rows sum to 1 − λ
        np.testing.assert_allclose(rows, 1 - float(module._compute_lambda()), atol=5e-3)
    else:
        np.testing.assert_allclose(rows, 1.0, atol=5e-3)
    assert A.rollout(loaded, x).shape == (1, 4, 4)
    torch.testing.assert_close(forward_logits(loaded, x), before, atol=1e-5, rtol=0)


def test_overview_is_the_individual_methods_in_one_pass(case):
    """`overview` equals head_maps, rollout and attention_stats computed separately. [parametrised ×6]"""
    layout, loaded, x, _, attns = case
    one = x[:1]
    ov = A.overview(loaded, one, fusion="max", discard=0.3)
    # two float32 paths through three blocks (one batched pass, one per method): their sums run in different
    # orders, and on a fresh clone here 2 of 32 probabilities differed by 1.2e-6; 1e-5 is float32's scale there
    for layer in range(3):
        np.testing.assert_allclose(ov.head_maps[layer], A.head_maps(loaded, one, layer)[0], atol=1e-5)
    np.testing.assert_allclose(ov.rollout, A.rollout(loaded, one, "max", 0.3)[0], atol=1e-5)
    stats = A.attention_stats(loaded, one)
    np.testing.assert_allclose(ov.distance, stats.distance, rtol=1e-5)
    np.testing.assert_allclose(ov.entropy, stats.entropy, rtol=1e-5)


def test_threads_sharing_a_model_do_not_mix_captures():
    """Capturing hooks and flags live on the shared module: concurrent jobs must not see each other's forwards.

    Four threads running gradient rollout / plain forwards + overview on one shared model each get their single-threaded
    results.
    """
    import threading

    loaded = _make("cls")
    x = torch.randn(1, 3, 32, 32)
    expected_grad = A.gradient_rollout(loaded, x).maps
    expected_logits = forward_logits(loaded, x)
    errors = []

    def grads():
        try:
            for _ in range(15):
                np.testing.assert_allclose(A.gradient_rollout(loaded, x).maps, expected_grad, atol=1e-6)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def plain():
        try:
            for _ in range(30):
                torch.testing.assert_close(forward_logits(loaded, x), expected_logits, atol=1e-5, rtol=0)
                A.overview(loaded, x)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in (grads, plain, grads, plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]


def test_attention_modules_are_walked_once_per_block_and_let_go_with_it():
    """The GUI asks every analysis' applicability on every model switch: a block's attention modules are found
    once (the same modules as a fresh walk of its tree) and the block is not kept alive by being asked about."""
    import gc
    import weakref

    import timm

    from vitstudio.core.models import structure

    model = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_classes=3)
    block = model.blocks[1]
    walked = [m for m in block.modules() if isinstance(getattr(m, "attn_drop", None), torch.nn.Module)
              and hasattr(m, "num_heads")]
    assert attention_modules(block) == walked == [block.attn]
    calls = []
    original = type(block).modules
    type(block).modules = lambda self: calls.append(self) or original(self)
    try:
        for _ in range(5):
            assert attention_modules(block) == walked
        attention_modules(block).clear()  # a caller changing its list does not change the next answer
        assert attention_modules(block) == walked and calls == []
    finally:
        type(block).modules = original
    gone = weakref.ref(block)
    del model, block, walked
    gc.collect()
    assert gone() is None and all(k is not None for k in structure._attention_modules.keys())
