"""The logit lens (issue 33, item 1): every block's tokens through the model's own final norm and head.

References: the block outputs are taken independently (forward hooks on the blocks, or the hand-written forward of
reference_vit for a plain ViT), then read through norm and forward_head as the published lens does; the last block
must be the model's forward, and for mean-pooled models the patch map's mean must be the pooled logit."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch

from tests.core.reference_vit import reference_forward, sharpen, wrap
from vitstudio.core.analysis import registry
from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.analysis.explain import explain
from vitstudio.core.analysis.logit_lens import logit_lens

SMALL = dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=4)
FAMILIES = {  # the seam matrix's timm kinds and the families of test_families
    "class token": ("vit_base_patch16_224", {}),
    "distilled": ("deit_tiny_distilled_patch16_224", {}),
    "registers, no class token": ("vit_base_patch16_reg4_gap_256", {}),
    "no class token": ("vit_base_patch16_224", dict(class_token=False, global_pool="avg")),
    "attention pooling": ("vit_base_patch16_224", dict(global_pool="map")),
    "eva02": ("eva02_tiny_patch14_224", {}),
    "beit": ("beit_base_patch16_224", {}),
    "dinov3": ("vit_small_patch16_dinov3", {}),
    "relpos": ("vit_relpos_small_patch16_224", {}),
}


def _model(kind):
    arch, extra = FAMILIES[kind]
    torch.manual_seed(0)
    return wrap(sharpen(timm.create_model(arch, pretrained=False, **SMALL, **extra), scale=0.6), (32, 32))


def _hooked_blocks(model, x):
    """Block outputs by forward hooks on model.blocks (not forward_intermediates)."""
    outs = []
    handles = [b.register_forward_hook(lambda _m, _i, o: outs.append(o)) for b in model.blocks]
    try:
        with torch.no_grad():
            logits = model(x)
    finally:
        for h in handles:
            h.remove()
    return logits, outs


@pytest.fixture(scope="module")
def x():
    return torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_every_block_is_read_through_the_models_head_and_the_last_is_its_forward(kind, x):
    """On nine families (class token, distilled, registers without a class token, mean pooling, attention pooling,
    EVA-02, BEiT, DINOv3, relpos): each block's logits equal forward_head(norm(block output)) with the outputs taken by
    forward hooks, the last block equals the model's logits (1e-6) and probabilities, the default class is the top-1;
    for mean-pooled models the patch map's mean equals the pooled logit at every block (1e-6); reference: hooks on the
    blocks + timm's forward. [parametrised ×9]
    """
    loaded = _model(kind)
    model = loaded.model
    reading = logit_lens(loaded, x)
    logits, outs = _hooked_blocks(model, x)
    with torch.no_grad():
        expected = torch.stack([model.forward_head(model.norm(o)) for o in outs], 1).numpy()
    assert reading.logits.shape == (2, SMALL["depth"], SMALL["num_classes"])
    np.testing.assert_allclose(reading.logits, expected, atol=1e-5)
    np.testing.assert_allclose(reading.logits[:, -1], logits.numpy(), atol=1e-6)  # the last block is predict
    np.testing.assert_allclose(reading.probabilities[:, -1], logits.softmax(-1).numpy(), atol=1e-6)
    assert reading.targets == tuple(logits.argmax(-1).tolist())
    if getattr(model, "global_pool", "") == "avg":  # mean pooling: the patch map's mean is the pooled logit
        means = reading.patch_logits.reshape(2, SMALL["depth"], -1).mean(-1)
        picked = np.take_along_axis(reading.logits, np.asarray(reading.targets)[:, None, None], 2)[..., 0]
        np.testing.assert_allclose(means, picked, atol=1e-6)


def test_a_plain_vits_patch_map_reads_each_patch_as_the_class_token(x):
    """Against the hand-written forward: patch p's logit at block l is head(norm(h_l[p])) for a class-token ViT.

    For a class-token ViT patch p's logit at block l is head(fc_norm(norm(h_l[p]))) of the hand-written forward's block
    outputs, for a class given; reference: reference_vit.reference_forward.
    """
    loaded = _model("class token")
    model = loaded.model
    with torch.no_grad():
        _, _, outs = reference_forward(model, x)
        reading = logit_lens(loaded, x, target=2)
        for layer, h in enumerate(outs):
            expected = model.head(model.fc_norm(model.norm(h[:, 1:])))[..., 2].numpy().reshape(2, 4, 4)
            np.testing.assert_allclose(reading.patch_logits[:, layer], expected, atol=1e-5)
    assert reading.targets == (2, 2)


def test_explain_writes_the_table_of_every_block_and_the_map_of_the_layer_asked(rgb_image):
    """explain(method="logit-lens", layer=1) gives the (gh, gw) map and a per-block table (top-3 sorted, the target's
    probability, the final top-1 as default class) that the parameter record carries.
    """
    loaded = _model("class token")
    exp = explain(loaded, "logit-lens", rgb_image, layer=1)
    assert exp.array.shape == (4, 4) and exp.params["layer"] == 1
    blocks = exp.params["blocks"]
    assert [b["block"] for b in blocks] == [0, 1, 2]
    last = blocks[-1]
    assert last["top"][0]["index"] == exp.params["target"]  # the default class is the final top-1
    assert last["target_probability"] == last["top"][0]["probability"]
    shown = [t["probability"] for t in last["top"]]
    assert len(shown) == 3 and shown == sorted(shown, reverse=True) and 0 < sum(shown) <= 1 + 1e-6
    record = registry.record("logit-lens", exp.params)
    assert record["blocks"][0]["top"][0]["class"].startswith("c")


@pytest.mark.parametrize("arch, extra, words", [
    ("swin_tiny_patch4_window7_224", dict(img_size=32, patch_size=4, window_size=2, embed_dim=32, depths=(1, 1),
                                          num_heads=(2, 2), num_classes=3), "local windows"),
    ("cait_xxs24_224", dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=3,
                            depth_token_only=1), "class-attention"),
    ("vit_base_patch16_224", dict(**{**SMALL, "num_classes": 0}), "headless"),
])
def test_models_without_a_token_through_every_block_or_without_a_head_are_refused_with_the_reason(arch, extra,
                                                                                                    words):
    """Swin (local windows), CaiT (class-attention) and a headless ViT are refused with a reason naming why.
    [parametrised ×3]
    """
    model = timm.create_model(arch, pretrained=False, **extra).eval()
    reason = why_not(model, "logit-lens")
    assert reason is not None and words in reason
