"""Embedding and model-intrinsic analyses against independent numpy / scikit-learn computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.core.reference_vit import reference_forward, sharpen, wrap
from vitstudio.core.analysis import embeddings as E
from vitstudio.core.analysis.intrinsic import filter_components, pos_embed_similarity


def _model(**kw):
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    args = dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=5)
    args.update(kw)
    hw = args["img_size"] if isinstance(args["img_size"], tuple) else (args["img_size"],) * 2
    return wrap(sharpen(VisionTransformer(**args)), hw)


def _same_up_to_sign(a, b, atol=1e-4):
    """Principal components are defined up to sign: compare column by column."""
    for j in range(a.shape[-1]):
        x, y = a[..., j].ravel(), b[..., j].ravel()
        assert min(np.abs(x - y).max(), np.abs(x + y).max()) < atol, j


@pytest.mark.parametrize("kw, prefix", [({}, 1), ({"reg_tokens": 4, "no_embed_class": True}, 5),
                                        ({"img_size": (24, 40)}, 1), ({"class_token": False, "global_pool": "avg"}, 0)])
def test_layer_tokens_match_block_outputs(kw, prefix):
    """Per-layer patch/prefix tokens and token norms equal the block outputs of the hand-written forward
    (reference_vit), for cls/registers/non-square/GAP. [parametrised ×4]
    """
    loaded = _model(**kw)
    x = torch.randn(2, 3, *loaded.input_hw)
    with torch.no_grad():
        _, _, outs = reference_forward(loaded.model, x)
    tokens = E.layer_tokens(loaded, x)
    gh, gw = loaded.grid_size
    for layer, out in enumerate(outs):
        ref = out.numpy()
        # float32 sums in another order: errors scale with the tokens' size, not each entry's (a fresh clone here
        # gave 1.1e-5 on an entry of 0.065 in tokens up to 4)
        atol = 1e-5 * np.abs(ref).max()
        np.testing.assert_allclose(tokens[layer].patches, ref[:, prefix:].reshape(2, gh, gw, -1), rtol=1e-5, atol=atol)
        np.testing.assert_allclose(tokens[layer].prefix, ref[:, :prefix], rtol=1e-5, atol=atol)
        norms, prefix_norms = E.token_norms(tokens[layer])
        np.testing.assert_allclose(norms, np.sqrt((ref[:, prefix:] ** 2).sum(-1)).reshape(2, gh, gw), rtol=1e-5)
        assert prefix_norms.shape == (2, prefix)


def test_pca_rgb_and_2d_against_sklearn():
    """PCA→RGB and 2-D PCA equal scikit-learn's PCA up to sign; a fixed basis reprojects another layer as (x − mean)·Cᵀ
    with unit components; reference: sklearn PCA.
    """
    loaded = _model()
    x = torch.randn(3, 3, 32, 32)
    tokens = E.layer_tokens(loaded, x)
    patches = tokens[2].patches
    flat = patches.reshape(-1, patches.shape[-1]).astype(np.float64)
    from sklearn.decomposition import PCA  # here: 1.6 s of import in every process collecting the file

    ref = PCA(n_components=3, svd_solver="full").fit_transform(flat)
    rgb, basis = E.pca_rgb(patches)
    assert rgb.shape == (3, 4, 4, 3)
    _same_up_to_sign(rgb.reshape(-1, 3), ref)
    coords, _ = E.pca_2d(patches)
    _same_up_to_sign(coords, ref[:, :2])
    # a fixed basis is reused as is on another layer: the projection is (tokens - mean) @ componentsᵀ
    other = tokens[1].patches
    reused, same = E.pca_rgb(other, basis)
    assert same is basis
    np.testing.assert_allclose(reused, (other - basis.mean) @ basis.components.T, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(basis.components, axis=1), 1.0, atol=1e-5)


def test_cosine_similarity():
    """Cosine similarity of every patch to one patch equals a loop formula in the test; self-similarity 1."""
    rng = np.random.default_rng(0)
    patches = rng.normal(size=(2, 3, 5, 8)).astype(np.float32)
    sim = E.cosine_similarity_to(patches, (2, 4))
    for b in range(2):
        ref_vec = patches[b, 2, 4]
        for r in range(3):
            for c in range(5):
                v = patches[b, r, c]
                expected = v @ ref_vec / np.linalg.norm(v) / np.linalg.norm(ref_vec)
                assert sim[b, r, c] == pytest.approx(expected, abs=1e-5)
    assert sim[0, 2, 4] == pytest.approx(1.0, abs=1e-6)


def test_pos_embed_similarity_and_filters():
    """Position-embedding cosine similarity for square/non-square/register layouts equals a formula in the test;
    patch-embedding filter components equal sklearn PCA of the conv weights up to sign.
    """
    layouts = (({}, (4, 4)), ({"img_size": (24, 40)}, (3, 5)), ({"reg_tokens": 4, "no_embed_class": True}, (4, 4)))
    for kw, grid in layouts:
        model = _model(**kw).model
        sim = pos_embed_similarity(model)
        pe = model.pos_embed.detach().numpy()[0]
        pe = pe if kw.get("no_embed_class") else pe[1:]
        unit = pe / np.linalg.norm(pe, axis=1, keepdims=True)
        np.testing.assert_allclose(sim, (unit @ unit.T).reshape(*grid, *grid), atol=1e-5)
    model = _model().model
    comps = filter_components(model, k=6)
    assert comps.shape == (6, 8, 8, 3)
    w = model.patch_embed.proj.weight.detach().numpy().reshape(32, -1).astype(np.float64)
    from sklearn.decomposition import PCA

    ref = PCA(n_components=6, svd_solver="full").fit(w).components_.reshape(6, 3, 8, 8).transpose(0, 2, 3, 1)
    _same_up_to_sign(comps.reshape(6, -1).T, ref.reshape(6, -1).T)
