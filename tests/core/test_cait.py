"""CaiT (Touvron et al. 2021): talking-heads self-attention among the patches, then class attention where only the
class token attends. The reference is a float64 transcription of the paper's forward written here from the
formulas (talking heads: mix the heads' logits, softmax, mix the heads again; class attention: the class token's
query against [class, patches]), using the model's weights; it gives the logits, every layer's attention and the
gradients of the top class with respect to them. The analyses are checked against float64 formulas over those maps,
with CaiT's two stages seen as one (1 + P)-token sequence (see `core/analysis/attention.py`)."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
from timm.models import save_for_hf

from tests.core.reference_vit import sharpen
from vitstudio.core.analysis import attention as A
from vitstudio.core.analysis import embeddings as E
from vitstudio.core.analysis.applicability import available
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.structure import attention_modules, trunk_blocks

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, depth_token_only=2, num_classes=5)


@pytest.fixture(scope="module")
def cait(tmp_path_factory):
    torch.manual_seed(0)
    model = sharpen(timm.create_model("cait_xxs24_224", pretrained=False, **TINY), scale=0.6)
    with torch.no_grad():  # layer scale starts at 1e-5; a trained model's is far larger, so make it matter here
        for name, p in model.named_parameters():
            if "gamma" in name:
                p.fill_(0.5)
    folder = tmp_path_factory.mktemp("cait")
    save_for_hf(model, str(folder), safe_serialization=True)
    return folder


def _heads(t, h):  # (B, N, C) -> (B, h, N, C/h)
    b, n, c = t.shape
    return t.reshape(b, n, h, c // h).transpose(1, 2)


def _mix(attn, linear):  # mixes the heads axis of (B, H, N, M) with a Linear(H, H)
    return torch.einsum("bhnm,gh->bgnm", attn, linear.weight) + linear.bias[None, :, None, None]


def reference(model, x):
    """float64 CaiT forward from the formulas: (logits, [attention per layer], the tensors to differentiate)."""
    model = model.double()
    x = x.double()
    maps = []
    tokens = model.patch_embed(x) + model.pos_embed
    for blk in model.blocks:  # talking-heads self-attention among the patches
        att = blk.attn
        h = att.num_heads
        y = blk.norm1(tokens)
        q, k, v = (_heads(t, h) for t in att.qkv(y).chunk(3, dim=-1))
        logits = (q * att.scale) @ k.transpose(-2, -1)
        a = _mix(_mix(logits, att.proj_l).softmax(-1), att.proj_w)
        a.retain_grad()
        maps.append(a)
        out = (a @ v).transpose(1, 2).reshape(tokens.shape)
        tokens = tokens + blk.gamma_1 * att.proj(out)
        tokens = tokens + blk.gamma_2 * blk.mlp(blk.norm2(tokens))
    cls = model.cls_token.expand(x.shape[0], -1, -1)
    for blk in model.blocks_token_only:  # only the class token queries, over [class, patches]
        att = blk.attn
        h = att.num_heads
        u = blk.norm1(torch.cat([cls, tokens], 1))
        q, k, v = _heads(att.q(u[:, :1]), h), _heads(att.k(u), h), _heads(att.v(u), h)
        a = ((q * att.scale) @ k.transpose(-2, -1)).softmax(-1)
        a.retain_grad()
        maps.append(a)
        cls = cls + blk.gamma_1 * att.proj((a @ v).transpose(1, 2).reshape(cls.shape))
        cls = cls + blk.gamma_2 * blk.mlp(blk.norm2(cls))
    logits = model.head(model.norm(torch.cat([cls, tokens], 1))[:, 0])
    return logits, maps


def embed(a, kind, keep=1.0):
    """numpy: a layer's map in the (1 + P)-token sequence; tokens outside the layer keep `keep` on the diagonal."""
    b, h, nq, nk = a.shape
    n = nk + 1 if kind == "patches" else nk
    out = np.broadcast_to(np.eye(n) * keep, (b, h, n, n)).copy()
    if kind == "patches":
        out[:, :, 1:, 1:] = a
    else:
        out[:, :, :1, :] = a
    return out


def test_cait_loads_predicts_and_explains_like_the_formulas(cait, photos):
    """Block kinds; logits = timm's own forward and the float64 paper forward; head maps, rollout, token maps, gradient
    rollout, distance/entropy, overview = formulas in the test; state restored; only text, the logit lens and key/query
    similarity refused, each saying why.
    """
    loaded = load_model(str(cait))
    assert [t.kind for t in trunk_blocks(loaded.model)] == ["patches"] * 2 + ["class"] * 2
    assert loaded.depth == 4 and loaded.token_depth == 2 and loaded.num_prefix_tokens == 1
    imgs = [read_image(photos[n]) for n in ("astronaut", "coffee")]
    x = torch.stack([loaded.to_tensor(loaded.crop(i)) for i in imgs])
    ref_model = timm.create_model(f"local-dir:{cait}", pretrained=True).eval()
    transform = timm.data.create_transform(**timm.data.resolve_model_data_config(ref_model))
    with torch.no_grad():
        timm_logits = ref_model(torch.stack([transform(i) for i in imgs]))
    before = forward_logits(loaded, x)
    torch.testing.assert_close(before, timm_logits, atol=1e-5, rtol=0)

    logits, maps = reference(ref_model, x)
    torch.testing.assert_close(logits.float(), before, atol=1e-5, rtol=0)
    targets = logits.argmax(-1)
    logits.gather(1, targets[:, None]).sum().backward()
    attns = [m.detach().numpy() for m in maps]
    grads = [m.grad.numpy() for m in maps]
    kinds = ["patches", "patches", "class", "class"]
    gh, gw = loaded.grid_size
    assert attns[0].shape == (2, 2, gh * gw, gh * gw) and attns[2].shape == (2, 2, 1, 1 + gh * gw)

    # head maps: mean attention received in the self-attention layers, the class token's row in class attention
    for layer, (a, kind) in enumerate(zip(attns, kinds)):
        expected = a.mean(2) if kind == "patches" else a[:, :, 0, 1:]
        np.testing.assert_allclose(A.head_maps(loaded, x, layer), expected.reshape(2, 2, gh, gw), atol=1e-5)
    # rollout over the (1 + P)-token sequence, class row
    for fusion, discard in (("mean", 0.0), ("max", 0.3)):
        r = np.broadcast_to(np.eye(1 + gh * gw), (2, 1 + gh * gw, 1 + gh * gw))
        for a, kind in zip(attns, kinds):
            seq = embed(a, kind)
            fused = {"mean": seq.mean(1), "max": seq.max(1)}[fusion]
            flat = fused.reshape(2, -1).copy()
            k = int(np.floor(discard * flat.shape[1]))
            for i in range(2):
                order = [j for j in np.argsort(flat[i], kind="stable") if j != 0][:k]
                flat[i, order] = 0
            a_hat = flat.reshape(fused.shape) + np.eye(fused.shape[-1])
            r = (a_hat / a_hat.sum(-1, keepdims=True)) @ r
        np.testing.assert_allclose(A.rollout(loaded, x, fusion, discard), r[:, 0, 1:].reshape(2, gh, gw), atol=1e-5)
    # token maps of patch (1, 2) in the sequence view: the patch keeps its value in the class-attention layers
    patch = (1, 2)
    q = 1 + patch[0] * gw + patch[1]
    tokens = A.token_maps(loaded, x, patch)
    for layer, (a, kind) in enumerate(zip(attns, kinds)):
        seq = embed(a, kind)
        np.testing.assert_allclose(tokens.attends_to[:, layer], seq[:, :, q, 1:].reshape(2, 2, gh, gw), atol=1e-5)
        np.testing.assert_allclose(tokens.attended_by[:, layer], seq[:, :, 1:, q].reshape(2, 2, gh, gw), atol=1e-5)
    # gradient rollout (Chefer et al.): R += mean_h relu(∂y/∂A ⊙ A) · R, the relevance of tokens outside a layer is 0
    r = np.broadcast_to(np.eye(1 + gh * gw), (2, 1 + gh * gw, 1 + gh * gw)).copy()
    for a, g, kind in zip(attns, grads, kinds):
        cam = embed(np.clip(g * a, 0, None).mean(1, keepdims=True), kind, keep=0.0)[:, 0]
        r = r + cam @ r
    gradient = A.gradient_rollout(loaded, x)
    assert gradient.targets == tuple(targets.tolist())
    np.testing.assert_allclose(gradient.maps, r[:, 0, 1:].reshape(2, gh, gw), atol=1e-5)
    # distance over patch queries (none in class attention: NaN); entropy only where rows are distributions
    stats = A.attention_stats(loaded, x)
    px = loaded.patch_size
    coords = np.array([(i // gw * px[0], i % gw * px[1]) for i in range(gh * gw)], float)
    dist = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    for layer, (a, kind) in enumerate(zip(attns, kinds)):
        if kind == "patches":
            np.testing.assert_allclose(stats.distance[layer], (a * dist).sum(-1).mean(-1).mean(0), rtol=1e-5)
            assert np.isnan(stats.entropy[layer]).all()  # talking heads: rows mixed after the softmax
        else:
            assert np.isnan(stats.distance[layer]).all()
            ent = -(a * np.log(a)).sum(-1).mean(-1).mean(0)
            np.testing.assert_allclose(stats.entropy[layer], ent, rtol=1e-4)
    ov = A.overview(loaded, x[:1])
    np.testing.assert_allclose(ov.rollout, A.rollout(loaded, x[:1])[0], atol=1e-6)
    assert ov.head_maps.shape == (4, 2, gh, gw)
    # nothing changed: same logits, fused switches restored
    torch.testing.assert_close(forward_logits(loaded, x), before, atol=1e-6, rtol=0)
    assert all(m.fused_attn for t in trunk_blocks(loaded.model) for m in attention_modules(t.block)
               if hasattr(m, "fused_attn"))
    refused = {m: why for m, why in available(loaded.model).items() if why is not None}
    # every image analysis applies but three that say why: the text map needs a CLIP-style text tower, the logit
    # lens a token that runs through every block (CaiT's class token enters only in its class-attention blocks), and
    # key/query similarity separate keys and queries (CaiT's talking-heads attention does not expose them)
    assert set(refused) == {"text", "logit-lens", "facet-similarity"} and "text tower" in refused["text"], refused
    assert "class-attention" in refused["logit-lens"] and "key/query similarity" in refused["facet-similarity"]


def test_cait_embeddings_and_fine_tuning(cait, tmp_path, photos):
    """Layer tokens of the patch stage (no prefix) equal timm's forward_intermediates; a last-blocks fine-tune changes
    only class-attention blocks and head, and the run loads in plain timm with the same logits (family_runs).
    [fine-tune]
    """
    from tests.core.family_runs import last_blocks_run

    loaded = load_model(str(cait))
    x = loaded.to_tensor(loaded.crop(read_image(photos["rocket"])))[None]
    tokens = E.layer_tokens(loaded, x)
    assert sorted(tokens) == [0, 1] and tokens[1].prefix.shape[1] == 0  # no class token in the patch stage
    ref = timm.create_model(f"local-dir:{cait}", pretrained=True).eval()
    with torch.no_grad():
        inter = ref.forward_intermediates(x, indices=[1], output_fmt="NLC", intermediates_only=True)
    np.testing.assert_allclose(tokens[1].patches.reshape(1, -1, 32), inter[0].numpy(), atol=1e-5)

    # last-blocks trains the last two trunk blocks, here CaiT's class-attention blocks, and leaves the patch stage
    changed = last_blocks_run(cait, loaded, tmp_path, 32, photos["coffee"])
    assert any(n.startswith("blocks_token_only.1.") for n in changed) and "head.weight" in changed
    assert not any(n.startswith(("blocks.", "patch_embed.", "pos_embed")) for n in changed)
