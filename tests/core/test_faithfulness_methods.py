"""The attribution methods (integrated gradients, occlusion, CP-LRP) against independent computations written here
from their definitions, their refusals, and their place in the registry, the CLI and the faithfulness ranking."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from tests.conftest import TINY_SPEC, make_tiny_vit
from tests.core.reference_vit import sharpen, wrap
from vitstudio.cli import main
from vitstudio.core.analysis import faithfulness, registry
from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.analysis.explain import explain
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model

NEW = ("integrated-gradients", "occlusion", "lrp")


@pytest.fixture
def loaded():
    return wrap(sharpen(make_tiny_vit(seed=5)), (32, 32))


@pytest.fixture
def image():
    rng = np.random.default_rng(2)
    return Image.fromarray((rng.random((32, 32, 3)) * 255).astype(np.uint8))


def _x(loaded, image):
    return loaded.to_tensor(loaded.crop(image))[None]


def _patch_sum(values: torch.Tensor, p: int) -> np.ndarray:
    """(H, W) -> (H/p, W/p) block sums, by loops."""
    h, w = values.shape
    out = np.zeros((h // p, w // p))
    for r in range(h // p):
        for c in range(w // p):
            out[r, c] = float(values[r * p:(r + 1) * p, c * p:(c + 1) * p].sum())
    return out


def test_integrated_gradients_is_the_gauss_legendre_path_integral(loaded, image):
    """IG equals a 32-node Gauss–Legendre path integral from a zero baseline, summed per patch; target = top-1."""
    x = _x(loaded, image)
    model = loaded.model
    target = int(model(x).argmax())
    nodes, weights = np.polynomial.legendre.leggauss(32)  # on [-1, 1]
    total = torch.zeros_like(x)
    for node, weight in zip(nodes, weights):
        xa = (x * (node + 1) / 2).requires_grad_(True)  # baseline 0
        (grad,) = torch.autograd.grad(model(xa)[0, target], xa)
        total += grad * weight / 2
    expected = _patch_sum((x * total)[0].sum(0).detach(), 8)
    got = explain(loaded, "integrated-gradients", image)
    np.testing.assert_allclose(got.array, expected, atol=1e-4)
    assert got.params["target"] == target


def test_occlusion_is_the_drop_in_probability_of_each_patch_zeroed(loaded, image):
    """Occlusion equals the drop in target probability with each patch zeroed (loop in the test); an explicit target is
    honoured.
    """
    x = _x(loaded, image)
    model = loaded.model
    with torch.no_grad():
        probs = model(x).softmax(-1)[0]
        target = int(probs.argmax())
        expected = np.zeros((4, 4))
        for r in range(4):
            for c in range(4):
                xo = x.clone()
                xo[:, :, r * 8:(r + 1) * 8, c * 8:(c + 1) * 8] = 0
                expected[r, c] = float(probs[target] - model(xo).softmax(-1)[0, target])
    got = explain(loaded, "occlusion", image, target=None)
    np.testing.assert_allclose(got.array, expected, atol=1e-5)
    other = (target + 1) % 5
    assert explain(loaded, "occlusion", image, target=other).params["target"] == other


def _ln_held(mod, t):
    mu = t.mean(-1, keepdim=True)
    sd = ((t - mu) ** 2).mean(-1, keepdim=True).add(mod.eps).sqrt().detach()
    return (t - mu) / sd * mod.weight + mod.bias


def cp_lrp_reference(model, x, target):
    """Ali et al. 2022 by hand: a forward with detached softmax weights and LayerNorm σ, grad × input summed over
    channels at the tokens entering block 0."""
    tokens = model.norm_pre(model._pos_embed(model.patch_embed(x))).detach().requires_grad_(True)
    h = tokens
    for blk in model.blocks:
        mod = blk.attn
        b, n, c = h.shape
        heads = mod.num_heads
        qkv = (_ln_held(blk.norm1, h) @ mod.qkv.weight.T + mod.qkv.bias).reshape(b, n, 3, heads, c // heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(c // heads), -1).detach()
        h = h + mod.proj((a @ v).transpose(1, 2).reshape(b, n, c))
        m = blk.mlp
        h = h + m.fc2(m.act(m.fc1(_ln_held(blk.norm2, h))))
    logits = model.head(_ln_held(model.norm, h)[:, 0])
    (grad,) = torch.autograd.grad(logits[0, target], tokens)
    return (tokens * grad).sum(-1)[0, model.num_prefix_tokens:].detach().numpy()


def test_cp_lrp_equals_the_conservative_forward_written_out(loaded, image):
    """CP-LRP (Ali et al. 2022) equals grad×input of a forward with detached softmax and LayerNorm σ written in the
    test, also with frozen weights and another target; fused attention restored.
    """
    x = _x(loaded, image)
    target = int(loaded.model(x).argmax())
    for p in loaded.model.parameters():  # frozen weights (as loaded models often are) still give relevance
        p.requires_grad_(False)
    got = explain(loaded, "lrp", image)
    np.testing.assert_allclose(got.array.ravel(), cp_lrp_reference(loaded.model, x, target), atol=1e-4)
    # the forward was not changed by the rules, and fused attention is back on
    assert all(b.attn.fused_attn == timm.layers.use_fused_attn() for b in loaded.model.blocks)
    other = explain(loaded, "lrp", image, target=(target + 1) % 5)
    np.testing.assert_allclose(other.array.ravel(), cp_lrp_reference(loaded.model, x, (target + 1) % 5), atol=1e-4)


def test_lrp_is_refused_where_its_rules_do_not_hold():
    """`why_not` refuses LRP for RmsNorm, Swin local windows and headless models (occlusion too); none for a plain ViT.
    """
    rms = make_tiny_vit(norm_layer=timm.layers.RmsNorm)
    reason = why_not(rms, "lrp")
    assert reason is not None and "RmsNorm" in reason and "LayerNorm" in reason
    swin = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, img_size=32, patch_size=4,
                             window_size=4, embed_dim=16, depths=(1, 1), num_heads=(1, 2), num_classes=3)
    assert "local windows" in why_not(swin, "lrp")
    headless = make_tiny_vit(num_classes=0)
    assert "headless" in why_not(headless, "lrp") and "headless" in why_not(headless, "occlusion")
    assert why_not(make_tiny_vit(), "lrp") is None


def test_new_methods_are_in_the_cli_compare_and_gui_lists():
    """The three methods are in the Compare and viewed attention lists and take only `target`."""
    assert set(NEW) <= set(registry.names(compare=True))
    assert set(NEW) <= set(registry.names("attention", viewed=True))
    for name in NEW:
        assert registry.get(name).param_names == ("target",)


def test_cli_explain_writes_each_new_method(tiny_weights, photos, tmp_path):
    """`explain --class 2` for each method writes an array equal to the registry's run and records target=2."""
    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    x = _x(loaded, read_image(photos["coffee"]))
    for name in NEW:
        out = tmp_path / f"{name}.npy"
        assert main(["explain", str(photos["coffee"]), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
                     "--method", name, "--class", "2", "--out", str(out)]) == 0
        assert json.loads((tmp_path / f"{name}.npy.json").read_text())["params"]["target"] == 2
        expected = registry.get(name).run(loaded, x, {"target": 2})[0]
        np.testing.assert_allclose(np.load(out), expected, atol=1e-5)


def test_new_methods_take_part_in_faithfulness(loaded, image):
    """`image_faithfulness` measures all three without errors."""
    x = _x(loaded, image)
    result = faithfulness.image_faithfulness(loaded, x, NEW, faithfulness.Protocol(steps=4))
    assert set(result.methods) == set(NEW) and not result.errors
