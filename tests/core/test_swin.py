"""Swin v1 and v2: attention inside (shifted) windows. Predictions equal timm's; token maps equal the softmax maps
read by timm's own AttentionExtract (forward hooks on each window attention's softmax), placed on the image by
pushing an index image through the same roll / pad / window_partition steps a Swin block takes (the reference for
the geometry, independent of the arithmetic in `window_attention.py`); global analyses are refused with the reason
before any work; stage embeddings equal timm's `forward_intermediates`; a Swin fine-tunes and loads back."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from timm.models import save_for_hf
from timm.models.swin_transformer import window_partition
from timm.utils import AttentionExtract

from tests.core.reference_vit import sharpen
from vitstudio.core.analysis import attention as A
from vitstudio.core.analysis import embeddings as E
from vitstudio.core.analysis.applicability import available
from vitstudio.core.analysis.capture import AttentionUnsupported
from vitstudio.core.analysis.explain import explain
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.structure import trunk_blocks

# 40 px / patch 4 = a 10×10 grid: windows of 4 need padding (to 12) and the odd blocks shift by 2; stage 2 is 5×5
TINY = dict(img_size=40, window_size=4, embed_dim=16, depths=(2, 2), num_heads=(1, 2), num_classes=5)
CASES = {"swin": "swin_tiny_patch4_window7_224", "swinv2": "swinv2_tiny_window8_256"}


@pytest.fixture(scope="module", params=list(CASES))
def swin(request, tmp_path_factory):
    torch.manual_seed(0)
    model = sharpen(timm.create_model(CASES[request.param], pretrained=False, **TINY), scale=0.6)
    folder = tmp_path_factory.mktemp(request.param)
    save_for_hf(model, str(folder), safe_serialization=True)
    return folder


def _window_softmax(folder, x):
    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    for module in model.modules():
        if hasattr(module, "fused_attn"):
            module.fused_attn = False
    maps = AttentionExtract(model, method="hook")(x)  # '*attn.softmax' modules, in forward order
    return model, [maps[k].detach().numpy() for k in maps]


def _slots(h, w, window, shift):
    """Stage cell index held by each (window, slot) after the block's roll and padding: -1 for padding."""
    idx = torch.arange(h * w, dtype=torch.float64).reshape(1, h, w, 1)
    idx = torch.roll(idx, shifts=(-shift[0], -shift[1]), dims=(1, 2))
    pad_h, pad_w = (-h) % window[0], (-w) % window[1]
    idx = torch.nn.functional.pad(idx, (0, 0, 0, pad_w, 0, pad_h), value=-1)
    return window_partition(idx, window).reshape(-1, window[0] * window[1]).long().numpy()


def _to_grid(values, cells, h, w, grid):
    out = np.full((values.shape[0], h * w), np.nan)
    keep = cells >= 0
    out[:, cells[keep]] = values[:, keep]
    out = out.reshape(-1, h, w)
    rows, cols = np.arange(grid[0]) * h // grid[0], np.arange(grid[1]) * w // grid[1]
    return out[:, rows][:, :, cols]


def test_swin_predicts_and_maps_attention_inside_windows(swin, photos):
    """depth/heads/grid; logits equal timm's forward and transform; token maps (attends-to/by) for three patches equal
    the window softmax from timm AttentionExtract mapped through roll/pad/window_partition, NaN for absent heads; logits
    unchanged. [parametrised ×2]
    """
    loaded = load_model(str(swin))
    assert loaded.depth == 4 and loaded.token_depth == 2 and loaded.num_heads == 2 and loaded.grid_size == (10, 10)
    imgs = [read_image(photos[n]) for n in ("astronaut", "coffee")]
    x = torch.stack([loaded.to_tensor(loaded.crop(i)) for i in imgs])
    ref, attns = _window_softmax(swin, x)
    transform = timm.data.create_transform(**timm.data.resolve_model_data_config(ref))
    with torch.no_grad():
        expected = ref(torch.stack([transform(i) for i in imgs]))
    before = forward_logits(loaded, x)
    torch.testing.assert_close(before, expected, atol=1e-5, rtol=0)

    grid = loaded.grid_size
    trunk = trunk_blocks(loaded.model)
    assert [t.block.shift_size for t in trunk][:2] == [(0, 0), (2, 2)]
    for patch in ((0, 0), (3, 7), (9, 9)):
        maps = A.token_maps(loaded, x, patch)
        for layer, (t, a) in enumerate(zip(trunk, attns)):
            h, w = (10, 10) if t.stage == 0 else (5, 5)
            cells = _slots(h, w, t.block.window_size, t.block.shift_size)
            cell = patch[0] * h // grid[0] * w + patch[1] * w // grid[1]
            win, slot = np.argwhere(cells == cell)[0]
            per_image = a.shape[0] // 2
            heads = a.shape[1]
            for b in range(2):
                window = a[b * per_image + win]  # (heads, n, n)
                np.testing.assert_allclose(maps.attends_to[b, layer, :heads],
                                           _to_grid(window[:, slot, :], cells[win], h, w, grid), atol=1e-5)
                np.testing.assert_allclose(maps.attended_by[b, layer, :heads],
                                           _to_grid(window[:, :, slot], cells[win], h, w, grid), atol=1e-5)
                assert np.isnan(maps.attends_to[b, layer, heads:]).all()  # stage 1 has one head of two
    torch.testing.assert_close(forward_logits(loaded, x), before, atol=1e-6, rtol=0)


def test_global_analyses_are_refused_with_the_reason(swin, photos, tmp_path):
    """heads/rollout/gradient-rollout/distance refused "inside local windows" by explain and CLI (exit 2, no file);
    exactly token/pca/similarity/norms/filters/IG/occlusion apply; token map via CLI works. [parametrised ×2]
    """
    from vitstudio.cli import main

    loaded = load_model(str(swin))
    reasons = available(loaded.model)
    for method in ("heads", "rollout", "gradient-rollout", "distance"):
        assert "inside local windows" in reasons[method]
        with pytest.raises(ValueError, match="does not apply to this model.*windows"):
            explain(loaded, method, read_image(photos["coffee"]))
    # the input attributions (integrated gradients, occlusion over patches) need no global attention
    assert {m for m, why in reasons.items() if why is None} == {"token", "pca", "similarity", "norms", "filters",
                                                                "integrated-gradients", "occlusion"}
    x = loaded.to_tensor(loaded.crop(read_image(photos["coffee"])))[None]
    with pytest.raises(AttentionUnsupported, match="windows"):
        A.rollout(loaded, x)
    assert main(["explain", str(photos["coffee"]), "--model", str(swin), "--method", "rollout",
                 "--out", str(tmp_path / "r.png")]) == 2
    assert not (tmp_path / "r.png").exists()
    assert main(["explain", str(photos["coffee"]), "--model", str(swin), "--method", "token", "--patch", "3,4",
                 "--out", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").stat().st_size > 0


def test_swin_stage_embeddings_and_fine_tuning(swin, photos, tmp_path):
    """Stage tokens equal timm forward_intermediates; coarse-stage similarity is drawn on the patch grid as a 2×2
    Kronecker upsample; last-blocks fine-tune changes only the last stage and loads in plain timm with equal logits.
    [parametrised ×2] [fine-tune]
    """
    from tests.core.family_runs import last_blocks_run

    loaded = load_model(str(swin))
    img = read_image(photos["rocket"])
    x = loaded.to_tensor(loaded.crop(img))[None]
    tokens = E.layer_tokens(loaded, x)
    ref = timm.create_model(f"local-dir:{swin}", pretrained=True).eval()
    with torch.no_grad():
        stages = ref.forward_intermediates(x, intermediates_only=True)
    for stage, expected in enumerate(stages):
        np.testing.assert_allclose(tokens[stage].patches[0], expected[0].permute(1, 2, 0).numpy(), atol=1e-5)
    assert tokens[1].patches.shape[1:3] == (5, 5)
    # the views of the coarse stage are drawn on the patch grid, each stage cell repeated over its 2×2 patches
    sim = explain(loaded, "similarity", img, layer=1, patch=(3, 7)).array
    assert sim.shape == (10, 10)
    coarse = E.cosine_similarity_to(tokens[1].patches, (1, 3))[0]
    np.testing.assert_allclose(sim, np.kron(coarse, np.ones((2, 2))), atol=1e-6)
    assert sim[3, 7] == pytest.approx(1.0, abs=1e-5)

    changed = last_blocks_run(swin, loaded, tmp_path, 40, photos["coffee"])
    assert any(n.startswith("layers.1.blocks.1.") for n in changed)
    assert not any(n.startswith(("layers.0.", "patch_embed.")) for n in changed)
