"""The app's LRP (`explain --method lrp`, CP-LRP after Ali et al. 2022) against lxt, the AttnLRP authors' library
(Achtibat et al. 2024, rachtibat/LRP-eXplains-Transformers), on one random ViT: torchvision's vit_b_16 architecture at a
tiny size as lxt patches it, and the same weights in timm as ViT Studio runs them. lxt is a development dependency
(`pip install lxt`); without it these tests are skipped.

lxt's ViT rules (lxt/efficient/models/vit_torch.py `cp_LRP`) are CP-LRP inside attention and at LayerNorm (the
attention weights and the LayerNorm σ held constant, lxt/efficient/patches.py `cp_multi_head_attention_forward`,
`layer_norm_forward`) plus AttnLRP's identity rule on GELU (relevance passed through as gelu(x)/x, Eq. 9). ViT Studio
takes gradient × input through GELU, as Ali et al. do: with lxt's two CP rules alone the maps are equal; with its GELU
rule they differ by that rule only (equal again once the MLPs use ReLU, where both rules agree), and only lxt's is
conservative (on a model without biases its relevance sums to the logit)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from torch import nn

from tests.core.reference_vit import wrap
from vitstudio.core.analysis.attribution import relevance

pytest.importorskip("lxt")
SIZE = dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=128, num_classes=5)


def torchvision_vit(seed: int = 0, biases: bool = True) -> nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(seed)
    model = VisionTransformer(**SIZE).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():  # torchvision zero-inits the head: every relevance would be 0
            p.copy_(0.3 * torch.randn_like(p) + (1.0 if name.endswith("ln_1.weight") or name.endswith(
                "ln_2.weight") or name.endswith("ln.weight") else 0.0))
            if not biases and name.endswith("bias"):
                p.zero_()
    return model


def as_timm(tv: nn.Module) -> nn.Module:
    """The same weights in timm's ViT (qkv packed as torchvision's in_proj; MLP Linear 0 and 3 are fc1 and fc2)."""
    model = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_classes=5).eval()
    sd = tv.state_dict()
    out = {"patch_embed.proj.weight": sd["conv_proj.weight"], "patch_embed.proj.bias": sd["conv_proj.bias"],
           "cls_token": sd["class_token"], "pos_embed": sd["encoder.pos_embedding"],
           "norm.weight": sd["encoder.ln.weight"], "norm.bias": sd["encoder.ln.bias"],
           "head.weight": sd["heads.head.weight"], "head.bias": sd["heads.head.bias"]}
    for i in range(SIZE["num_layers"]):
        tv_layer, block = f"encoder.layers.encoder_layer_{i}.", f"blocks.{i}."
        for ours, theirs in (("norm1", "ln_1"), ("norm2", "ln_2"), ("attn.qkv", "self_attention.in_proj"),
                             ("attn.proj", "self_attention.out_proj"), ("mlp.fc1", "mlp.0"), ("mlp.fc2", "mlp.3")):
            for kind in ("weight", "bias"):
                key = f"{tv_layer}{theirs}_{kind}" if theirs.endswith("in_proj") else f"{tv_layer}{theirs}.{kind}"
                out[f"{block}{ours}.{kind}"] = sd[key]
    model.load_state_dict(out)
    return model


@pytest.fixture(scope="module")
def patches():
    """lxt's rule functions (lxt/efficient/rules.py, patches.py), loaded from their files: lxt.efficient's package
    imports every model it patches, and its BERT module fails on transformers 5 (find_pruneable_heads_and_indices)."""
    import lxt

    folder = Path(lxt.__file__).parent / "efficient"
    added = [name for name in ("lxt.efficient", "lxt.efficient.rules", "lxt.efficient.patches")
             if name not in sys.modules]
    package = types.ModuleType("lxt.efficient")
    package.__path__ = [str(folder)]
    sys.modules.setdefault("lxt.efficient", package)
    try:
        for name in ("rules", "patches"):
            spec = importlib.util.spec_from_file_location(f"lxt.efficient.{name}", folder / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        yield sys.modules["lxt.efficient.patches"]
    finally:
        for name in added:
            sys.modules.pop(name, None)


@contextlib.contextmanager
def lxt_rules(patches, with_gelu: bool):
    """lxt's ViT rules as lxt/efficient/models/vit_torch.py's `cp_LRP` names them (GELU: the identity rule; LayerNorm:
    σ held; MultiheadAttention: query and key held), patched into torch's classes as its `monkey_patch` does, and
    undone afterwards."""
    rules = {nn.LayerNorm: partial(patches.patch_method, patches.layer_norm_forward),
             nn.MultiheadAttention: partial(patches.patch_method, patches.cp_multi_head_attention_forward,
                                            keep_original=True)}
    if with_gelu:
        rules[nn.GELU] = partial(patches.patch_method, patches.non_linear_forward, keep_original=True)
    saved = {cls: (cls.forward, cls.__dict__.get("original_forward")) for cls in rules}
    try:
        for cls, patch in rules.items():
            assert patch(cls)
        yield
    finally:
        for cls, (forward, original) in saved.items():
            cls.forward = forward
            if original is None and "original_forward" in cls.__dict__:
                del cls.original_forward


def lxt_relevance(patches, tv: nn.Module, x: torch.Tensor, target: int, with_gelu: bool
                  ) -> tuple[np.ndarray, float, float]:
    """(each patch token's relevance entering the first encoder layer (gh·gw,), the sum over every token, the logit),
    gradient × input there as lxt's examples take it."""
    held = {}

    def leaf(_module, args):
        held["h"] = args[0].detach().requires_grad_(True)
        return (held["h"], *args[1:])

    handle = tv.encoder.layers[0].register_forward_pre_hook(leaf)
    try:
        with lxt_rules(patches, with_gelu):
            logit = tv(x)[0, target]
            logit.backward()
    finally:
        handle.remove()
    r = (held["h"] * held["h"].grad)[0].sum(-1).detach()
    return r[1:].numpy(), float(r.sum()), float(logit.detach())


@pytest.fixture(scope="module")
def shared():
    tv = torchvision_vit()
    model = as_timm(tv)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(x), tv(x), atol=1e-5, rtol=1e-5)  # one model in both libraries
    return tv, model, x


def test_cp_lrp_equals_lxt_with_its_attention_and_layernorm_rules(shared, patches):
    """On the same random weights, ViT Studio's relevance equals lxt's with its CP rules at attention and LayerNorm
    (1e-5 of the map's largest value), for two classes."""
    tv, model, x = shared
    loaded = wrap(model, (32, 32))
    for target in (0, 3):
        ours = relevance(loaded, x, target).maps[0].ravel()
        theirs, _, _ = lxt_relevance(patches, tv, x, target, with_gelu=False)
        np.testing.assert_allclose(ours, theirs, atol=1e-5 * np.abs(theirs).max())


def test_the_difference_from_lxts_default_is_its_gelu_identity_rule_which_conserves(shared, patches):
    """With lxt's GELU identity rule (its vit_torch default) the maps differ; with ReLU MLPs, where gradient × input and
    the identity rule agree, they are equal (1e-5): the GELU rule is the whole difference. On a model without biases
    lxt's relevance sums to the logit (conservation, 1e-4) and ours does not."""
    tv, model, x = shared
    ours = relevance(wrap(model, (32, 32)), x, 2).maps[0].ravel()
    theirs, _, _ = lxt_relevance(patches, tv, x, 2, with_gelu=True)
    assert np.abs(ours - theirs).max() > 1e-3 * np.abs(theirs).max()
    relu_tv = torchvision_vit()
    for layer in relu_tv.encoder.layers:
        layer.mlp[1] = nn.ReLU()
    relu_model = as_timm(relu_tv)
    for block in relu_model.blocks:
        block.mlp.act = nn.ReLU()
    theirs, _, _ = lxt_relevance(patches, relu_tv, x, 2, with_gelu=True)
    ours = relevance(wrap(relu_model, (32, 32)), x, 2).maps[0].ravel()
    np.testing.assert_allclose(ours, theirs, atol=1e-5 * np.abs(theirs).max())
    plain = torchvision_vit(biases=False)
    _, total, logit = lxt_relevance(patches, plain, x, 2, with_gelu=True)
    assert abs(total - logit) < 1e-4 * max(1.0, abs(logit))
    _, total_cp, _ = lxt_relevance(patches, plain, x, 2, with_gelu=False)  # ours, by the test above
    assert abs(total_cp - logit) > 1e-3 * abs(logit)
