"""Register neurons and the test-time register (Jiang et al. 2025), on a tiny ViT with a planted register neuron
(tests/core/planted_registers.py): the search against a transcription of the paper's `find_register_neurons`
(test-time-registers' shared/algorithms.py:6-83), the register against a hand-written forward with the token where the
paper puts it (after the patches, shared/hook_fn.py:13-23), token norms against norms computed by hand from timm's
blocks, and the command line (`registers`, `artifacts`, `explain --method norms --registers`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import timm
import torch
from timm.models import save_for_hf

from tests.core.generators import drain
from tests.core.planted_registers import DEPTH, LAYER, NEURON, RED, planted_vit, red_images
from tests.core.reference_vit import reference_forward, wrap
from vitstudio.cli import main
from vitstudio.core.analysis import registers as R
from vitstudio.core.analysis.attention import attention_maps
from vitstudio.core.analysis.token_norms import layer_norms
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model

THRESHOLD = 20.0  # the planted outliers' norm is ~380, every other token's below 8


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """(LoadedModel of the planted ViT loaded from its timm folder as the command line loads it, its images' folder,
    their tensors (6, 3, 32, 32), the model folder). Its folder says crop 100 %, so the red patches stay on the grid."""
    folder = tmp_path_factory.mktemp("registers")
    paths = red_images(folder / "red")
    model = planted_vit()
    model.pretrained_cfg = {**model.pretrained_cfg, "input_size": (3, 32, 32), "crop_pct": 1.0}
    save_for_hf(model, str(folder / "planted"), safe_serialization=True)
    loaded = load_model(str(folder / "planted"))
    x = torch.stack([loaded.to_tensor(loaded.crop(read_image(p))) for p in paths])
    return loaded, folder / "red", x, folder / "planted"


def _search(loaded, folder, **kw):
    return drain(R.find_register_neurons(loaded, [str(folder)], **kw))


# -- a transcription of the reference ----------------------------------------------------------------------------
def reference_find_register_neurons(model, images, register_norm_threshold, detect_outliers_layer,
                                    apply_sparsity_filter=False, sparsity_frac_threshold=0.5,
                                    sparsity_activation_threshold=0.5):
    """shared/algorithms.py:6-83 line by line, one image at a time; its hook manager's logs are forward hooks on
    each block (layer outputs) and on `mlp.act` (neuron activations), image 0 of a batch of one."""
    num_layers = len(model.blocks)
    num_neurons = model.blocks[0].mlp.fc1.out_features
    neuron_scores = torch.zeros((len(images), num_layers, num_neurons))
    image_count = 0
    for i in range(len(images)):
        outputs, acts = [], []
        hooks = [b.register_forward_hook(lambda _m, _i, o, logs=outputs: logs.append(o[0])) for b in model.blocks]
        hooks += [b.mlp.act.register_forward_hook(lambda _m, _i, o, logs=acts: logs.append(o[0]))
                  for b in model.blocks]
        with torch.no_grad():
            model(images[i][None])
        for h in hooks:
            h.remove()
        baseline_neuron_acts, baseline_layer_outputs = torch.stack(acts), torch.stack(outputs)
        norm_map = torch.norm(baseline_layer_outputs[detect_outliers_layer], dim=1)
        filtered_norms = norm_map.clone()
        filtered_norms[filtered_norms < register_norm_threshold] = 0
        register_locations = torch.where(filtered_norms > register_norm_threshold)[0]
        if len(register_locations) == 0:
            continue
        for layer in range(num_layers):
            act_layer = baseline_neuron_acts[layer]
            register_values = torch.abs(act_layer[register_locations])
            if apply_sparsity_filter:
                sparse_neurons = (torch.sum(act_layer < sparsity_activation_threshold, dim=0)
                                  >= sparsity_frac_threshold * act_layer.shape[0])
                if not torch.any(sparse_neurons):
                    continue
                neuron_scores[image_count, layer] = register_values.mean(dim=0) * sparse_neurons.float()
            else:
                neuron_scores[image_count, layer] = register_values.mean(dim=0)
        image_count += 1
    assert image_count > 0
    mean_neuron_scores = neuron_scores[:image_count].mean(dim=0)
    sorted_values, sorted_indices = torch.sort(mean_neuron_scores.flatten(), descending=True)
    return [(idx.item() // num_neurons, idx.item() % num_neurons, sorted_values[i].item())
            for i, idx in enumerate(sorted_indices)]


def reference_register_forward(model, x, neurons: dict[int, list[int]], scale=1.0):
    """(logits, block outputs (B, N + 1, C)) with the extra token where the paper puts it, after the patches
    (dinov2/models/vision_transformer.py:224-240 of the reference), every chosen neuron's activation on it set to
    its signed maximum over the tokens and the patches' to 0 (hook_fn.py:13-23), by hand from timm's block parts."""
    x = model.norm_pre(model._pos_embed(model.patch_embed(x)))
    x = torch.cat([x, x.new_zeros(x.shape[0], 1, x.shape[2])], 1)
    outs = []
    for i, blk in enumerate(model.blocks):
        x = x + blk.ls1(blk.attn(blk.norm1(x)))
        h = blk.mlp.act(blk.mlp.fc1(blk.norm2(x)))
        for n in neurons.get(i, []):
            col = h[:, :, n]
            hi, lo = col.max(1).values, col.min(1).values
            h = h.clone()
            h[:, -1, n] = scale * torch.where(hi.abs() > lo.abs(), hi, lo)
            h[:, 1:-1, n] = 0
        x = x + blk.ls2(blk.mlp.fc2(h))
        outs.append(x)
    return model.forward_head(model.norm(x[:, :-1])), outs


# -- the search ---------------------------------------------------------------------------------------------------
def test_the_search_ranks_the_planted_neuron_first_where_it_fires(planted):
    """With the threshold `auto` from the folder's norms, the planted neuron is first, every image has outliers, the
    outliers at the detect layer are exactly the red patches (where the neuron fires), and it is silent elsewhere."""
    loaded, folder, x, _ = planted
    result, errors = _search(loaded, folder, detect_layer=-2, threshold="auto", top_k=5)
    assert not errors and result.images == result.images_with_outliers == 6
    assert (result.neurons[0].layer, result.neurons[0].neuron) == (LAYER, NEURON)
    assert result.neurons[0].score > 20 * result.neurons[1].score and result.neurons[0].elsewhere < 1e-3
    assert result.threshold_rule.startswith("auto")
    norms = R.detect_norms(loaded, x, DEPTH - 2)  # (6, 17)
    p = loaded.num_prefix_tokens
    red = sorted(p + r * 4 + c for r, c in RED)
    for row in norms:
        assert sorted(torch.nonzero(row > result.threshold).flatten().tolist()) == red


@pytest.mark.parametrize("sparse", [False, True])
def test_the_search_equals_the_papers_find_register_neurons(planted, sparse):
    """Same (layer, neuron) order and scores (1e-5) as a transcription of algorithms.py:6-83 on the same images,
    filtered to layers <= highest_layer and cut to top_k as the reference notebook does, with and without the sparsity
    filter. [parametrised ×2]"""
    loaded, folder, x, _ = planted
    result, _ = _search(loaded, folder, detect_layer=-2, threshold=THRESHOLD, highest_layer=2, top_k=12,
                        sparsity_filter=sparse)
    expected = [n for n in reference_find_register_neurons(loaded.model, x, THRESHOLD, -2, sparse) if n[0] <= 2][:12]
    assert [(n.layer, n.neuron) for n in result.neurons] == [(layer, neuron) for layer, neuron, _ in expected]
    np.testing.assert_allclose([n.score for n in result.neurons], [s for *_, s in expected], rtol=1e-5, atol=1e-6)


def test_nothing_is_reported_without_the_planted_neuron(planted):
    """The same model without the neuron's weights: no token of any image is above the threshold that finds the
    planted one, and no neuron is reported."""
    loaded, folder, _, _ = planted
    result, _ = _search(wrap(planted_vit(plant=False), (32, 32)), folder, detect_layer=-2, threshold=THRESHOLD)
    assert result.images == 6 and result.images_with_outliers == 0 and result.neurons == ()
    found, _ = _search(loaded, folder, detect_layer=-2, threshold=THRESHOLD)
    assert found.images_with_outliers == 6


# -- the test-time register -------------------------------------------------------------------------------------
def test_the_test_time_register_takes_the_high_norm_and_the_attention(planted):
    """With the register on the planted neuron, the maximum patch norm of every block from the neuron's on falls by
    at least half and the register's norm carries it; the class token's attention to the outlier patches in the
    block after falls; a batch of 3 gives what each image gives alone."""
    loaded, _, x, _ = planted
    x = x[:3]
    before = layer_norms(loaded, x)
    attn_before = attention_maps(loaded, x, [LAYER + 1])[LAYER + 1].astype(np.float32)  # (B, H, N, N)
    with R.test_time_register(loaded, {LAYER: [NEURON]}):
        after = layer_norms(loaded, x)
        attn_after = attention_maps(loaded, x, [LAYER + 1])[LAYER + 1].astype(np.float32)
        alone = [layer_norms(loaded, x[i:i + 1]) for i in range(3)]
    assert after.names == ("class", "test-time register") and before.names == ("class",)
    for layer in range(LAYER, DEPTH):
        assert (after.max_patch[:, layer] <= 0.5 * before.max_patch[:, layer]).all()
        assert (after.prefix[:, layer, 1] >= 0.5 * before.max_patch[:, layer]).all()
    red = [r * 4 + c for r, c in RED]
    to_red_before = attn_before[:, :, 0, [1 + i for i in red]].sum(-1).mean(1)  # class row, over heads
    to_red_after = attn_after[:, :, 0, [2 + i for i in red]].sum(-1).mean(1)
    assert (to_red_after < 0.5 * to_red_before).all() and (attn_after[:, :, 0, 1].mean(1) > to_red_after).all()
    for i, one in enumerate(alone):
        np.testing.assert_allclose(one.patches[0], after.patches[i], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(one.prefix[0], after.prefix[i], rtol=1e-5, atol=1e-5)
    assert R.register_index(loaded.model) is None and loaded.num_prefix_tokens == 1  # gone after the context


def test_the_register_equals_the_papers_layout(planted):
    """Our register (after the class token, counted among the prefix tokens) gives the logits, every patch norm and the
    register's norm of a hand-written forward with the token after the patches, as the paper puts it (1e-5)."""
    loaded, _, x, _ = planted
    neurons = {LAYER: [NEURON, 3], LAYER + 1: [5]}
    with torch.no_grad():
        logits, outs = reference_register_forward(loaded.model, x, neurons)
    with R.test_time_register(loaded, neurons), torch.no_grad():
        ours = loaded.model(x)
        norms = layer_norms(loaded, x)
    torch.testing.assert_close(ours, logits, atol=1e-5, rtol=1e-5)
    for layer, out in enumerate(outs):
        np.testing.assert_allclose(norms.patches[:, layer].reshape(len(x), -1), out[:, 1:-1].norm(dim=-1).numpy(),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(norms.prefix[:, layer, 1], out[:, -1].norm(dim=-1).numpy(), rtol=1e-5, atol=1e-5)


def test_eva_swiglu_is_hooked_at_its_gated_product_and_other_families_are_refused():
    """EVA-02 (SwiGLU, RoPE): the register's activation is the signed maximum of act(g)·x, the patches' 0, and the
    forward runs with the token unrotated among the prefix tokens. Swin, CaiT, BEiT, relpos and NaFlexViT are refused
    in one line naming why."""
    tiny = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
    torch.manual_seed(0)
    eva = wrap(timm.create_model("eva02_tiny_patch14_224", pretrained=False, **tiny), (32, 32))
    x = torch.randn(2, 3, 32, 32)
    seen = {}
    mlp = eva.model.blocks[0].mlp
    mlp.drop1.register_forward_hook(lambda _m, _i, out: seen.__setitem__("before", out.detach().clone()))
    with R.test_time_register(eva, {0: [4]}), torch.no_grad():
        mlp.drop1.register_forward_hook(lambda _m, _i, out: seen.__setitem__("after", out.detach()))  # after ours
        assert eva.model(x).shape == (2, 5) and eva.num_prefix_tokens == 2
    before, after = seen["before"], seen["after"]  # (2, class + register + 16 patches, hidden)
    assert after.shape[1] == 18 and (after[:, 2:, 4] == 0).all()
    torch.testing.assert_close(after[:, 1, 4], R.signed_max(before[:, :, [4]])[:, 0])
    others = [i for i in range(after.shape[2]) if i != 4]
    torch.testing.assert_close(after[:, :, others], before[:, :, others])
    refused = {
        "swin": timm.create_model("swin_tiny_patch4_window7_224", pretrained=False, img_size=32, patch_size=4,
                                  window_size=4, embed_dim=16, depths=(1, 1), num_heads=(1, 1), num_classes=5),
        "cait": timm.create_model("cait_xxs24_224", pretrained=False, **{**tiny, "depth": 1}, depth_token_only=1),
        "beit": timm.create_model("beit_base_patch16_224", pretrained=False, **tiny),
        "relpos": timm.create_model("vit_relpos_small_patch16_224", pretrained=False, **tiny),
        "naflexvit": timm.create_model("naflexvit_base_patch16_gap", pretrained=False, **tiny),
    }
    words = {"swin": "windows", "cait": "class-attention", "beit": "relative-position", "relpos": "relative-position",
             "naflexvit": "_pos_embed"}
    for name, model in refused.items():
        with pytest.raises(R.RegisterError) as caught, R.test_time_register(wrap(model, (32, 32)), {0: [0]}):
            pass
        assert words[name] in str(caught.value) and "\n" not in str(caught.value), name


def test_a_register_file_is_read_safely(planted, tmp_path):
    """A register file round-trips; one that is too big, not JSON, of another format, with a bad neuron, or naming a
    block or neuron the model lacks is refused in one line (a RegisterError)."""
    loaded, folder, _, _ = planted
    result, _ = _search(loaded, folder, detect_layer=-2, threshold=THRESHOLD, top_k=3)
    path = R.write_registers(result, tmp_path / "r.json")
    assert R.read_registers(path) == result
    good = json.loads(path.read_text())
    cases = {"big.json": b" " * (R.MAX_FILE_BYTES + 1), "bad.json": b"{not json", "bin.json": b"\xff\xfe\x00",
             "other.json": json.dumps({"neurons": []}).encode(),
             "neg.json": json.dumps({**good, "neurons": [{"layer": -1, "neuron": 0}]}).encode(),
             "str.json": json.dumps({**good, "neurons": [{"layer": "1", "neuron": 0}]}).encode(),
             "list.json": b"[1, 2]"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(R.RegisterError) as caught:
            R.read_registers(tmp_path / name)
        assert "\n" not in str(caught.value) and name in str(caught.value), name
    for bad in ({"layer": DEPTH, "neuron": 0}, {"layer": 0, "neuron": 128}):
        (tmp_path / "far.json").write_text(json.dumps({**good, "neurons": [bad]}))
        with pytest.raises(R.RegisterError, match="another model"):
            R.check_fits(loaded, R.read_registers(tmp_path / "far.json"))


# -- the command line ---------------------------------------------------------------------------------------------
def test_registers_and_artifacts_on_the_command_line(planted, tmp_path, capsys):
    """`registers --detect-layer -2 --out F.json --json` finds the planted neuron first and writes F; `artifacts`
    reports the per-layer maxima and the outliers per image (at the red patches), and with `--registers F` the
    maxima from the neuron's block on fall by at least half and no patch is an outlier at the detect layer."""
    _, folder, _, model_folder = planted
    model = ["--model", str(model_folder)]
    out = tmp_path / "reg.json"
    assert main(["registers", str(folder), *model, "--detect-layer", "-2", "--top", "3", "--out", str(out),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["neurons"][0]["layer"], doc["neurons"][0]["neuron"]) == (LAYER, NEURON) and out.exists()
    assert doc["threshold_rule"].startswith("auto")
    runs = {}
    for name, extra in (("plain", []), ("register", ["--registers", str(out)])):
        assert main(["artifacts", str(folder), *model, "--threshold", str(THRESHOLD), "--layer", "-2", "--json",
                     *extra]) == 0
        runs[name] = json.loads(capsys.readouterr().out)
    plain, register = runs["plain"], runs["register"]
    assert plain["images"] == 6 and len(plain["layers"]) == DEPTH
    assert all(sorted(map(tuple, image["where"])) == sorted(RED) for image in plain["per_image"])
    for layer in range(LAYER, DEPTH):
        assert register["layers"][layer]["max_patch_norm"] <= 0.5 * plain["layers"][layer]["max_patch_norm"]
        assert register["layers"][layer]["prefix_max_norm"]["test-time register"] > THRESHOLD
    assert all(image["where"] == [] for image in register["per_image"])


def test_registers_refuse_in_one_line(planted, tmp_path, capsys, photos):
    """Without any token above the threshold `registers` says so and writes nothing (exit 0); a malformed register
    file given to explain is refused in one line before any image is read (exit 2)."""
    _, folder, _, model_folder = planted
    out = tmp_path / "none.json"
    assert main(["registers", str(folder), "--model", str(model_folder), "--threshold", "1e6",
                 "--out", str(out)]) == 0
    assert "no token is above the threshold" in capsys.readouterr().err and not out.exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["explain", str(photos["chelsea"]), "--model", str(model_folder), "--method", "norms",
                 "--registers", str(bad), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "not a register file" in err and len(err.splitlines()) == 1


def test_explain_norms_equals_norms_by_hand_with_and_without_the_register(planted, tmp_path):
    """`explain --method norms --layer L` writes the patch norms of block L computed by hand from timm's blocks (1e-5),
    and with `--registers` those of the hand-written register forward; the sidecar records every layer's maximum
    patch norm, the class token's and register's norms by name, and the register file the model ran with."""
    loaded, folder, _, model_folder = planted
    result, _ = _search(loaded, folder, detect_layer=-2, threshold=THRESHOLD, top_k=1)
    registers = R.write_registers(result, tmp_path / "reg.json")
    image = folder / "img0.png"
    x = loaded.to_tensor(loaded.crop(read_image(image)))[None]
    with torch.no_grad():
        _, _, plain = reference_forward(loaded.model, x)
        _, with_register = reference_register_forward(loaded.model, x, {LAYER: [NEURON]})
    for layer in (1, 3):
        for extra, outs, patches in (([], plain, slice(1, None)), (["--registers", str(registers)], with_register,
                                                                   slice(1, -1))):
            out = tmp_path / f"n{layer}{len(extra)}.npy"
            assert main(["explain", str(image), "--model", str(model_folder), "--method", "norms",
                         "--layer", str(layer), "--out", str(out), *extra]) == 0
            expected = outs[layer][0, patches].norm(dim=-1).reshape(4, 4).numpy()
            np.testing.assert_allclose(np.load(out), expected, rtol=1e-5, atol=1e-5)
            params = json.loads(out.with_suffix(".npy.json").read_text())["params"]
            assert len(params["max_patch_norm"]) == DEPTH
            np.testing.assert_allclose(params["max_patch_norm"][layer], expected.max(), rtol=1e-5)
            names = {"class"} | ({"test-time register"} if extra else set())
            assert set(params["prefix_norms"]) == names and params.get("registers") == (str(registers) if extra
                                                                                         else None)


def test_predict_with_registers_runs_the_model_with_the_register(planted, tmp_path, capsys):
    """`predict FOLDER --registers F --json` gives the probabilities of the model with the test-time register (1e-5),
    not the embedding cache's (which holds the plain model's, filled by a plain predict first), and beside them the
    plain model's top-1 (`without_register`)."""
    loaded, folder, x, model_folder = planted
    result, _ = _search(loaded, folder, detect_layer=-2, threshold=THRESHOLD, top_k=1)
    registers = R.write_registers(result, tmp_path / "reg.json")
    with torch.no_grad():
        plain = torch.softmax(loaded.model(x), -1)
        with R.test_time_register(loaded, result):
            moved = torch.softmax(loaded.model(x), -1)
    assert (plain - moved).abs().max() > 1e-3  # the register changes what the model predicts
    for extra, expected in (([], plain), (["--registers", str(registers)], moved)):
        assert main(["predict", str(folder), "--model", str(model_folder), "--topk", "5", "--json", *extra]) == 0
        rows = {json.loads(line)["path"]: json.loads(line) for line in capsys.readouterr().out.splitlines()}
        for i in range(len(x)):
            row = rows[str(folder / f"img{i}.png")]
            np.testing.assert_allclose([t["prob"] for t in row["top"]],
                                       expected[i][[t["index"] for t in row["top"]]].numpy(), rtol=1e-5, atol=1e-5)
            without = row.get("without_register")  # beside it, the plain model's top-1
            assert (without is None) == (not extra)
            if extra:
                assert without["index"] == int(plain[i].argmax())
                np.testing.assert_allclose(without["prob"], float(plain[i].max()), rtol=1e-5)
    assert main(["predict", str(folder / "img0.png"), "--model", str(model_folder), "--registers", str(registers)]) == 0
    assert f"without the register: {float(plain[0].max()) * 100:.2f}%" in capsys.readouterr().out


# every family the register applies to × every analysis: what a face computes with `--registers`
FAMILIES = {"vit": "vit_base_patch16_224", "eva02": "eva02_tiny_patch14_224", "dinov3": "vit_small_patch16_dinov3",
            "deit-distilled": "deit_base_distilled_patch16_224", "reg4-gap": "vit_base_patch16_reg4_gap_256",
            "siglip": "vit_base_patch16_siglip_224"}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_analysis_runs_with_the_register_in_every_family_that_takes_one(family, photos):
    """Every analysis that applies to the family (but the file- and text-driven ones) gives with the test-time register
    an array of the shape it gives without, finite where defined; the token norms name the register after the model's
    own prefix tokens; the model-intrinsic views are unchanged. [parametrised ×6: ViT, EVA-02 (SwiGLU, RoPE), DINOv3
    (RoPE, 4 registers), DeiT distilled, 4 registers + mean pooling, SigLIP (no class token, attention pooling)]"""
    from vitstudio.core.analysis import registry
    from vitstudio.core.analysis.applicability import why_not
    from vitstudio.core.analysis.explain import explain

    torch.manual_seed(0)
    model = timm.create_model(FAMILIES[family], pretrained=False, img_size=32, patch_size=8, embed_dim=32, depth=2,
                              num_heads=2, num_classes=5)
    loaded = wrap(model, (32, 32))
    assert R.why_no_register(model) is None
    image = read_image(photos["chelsea"])
    own = loaded.num_prefix_tokens
    methods = [m for m in registry.REGISTRY if why_not(model, m) is None and m not in ("concept", "text")]
    assert {"heads", "rollout", "norms", "lrp", "logit-lens"} <= set(methods)
    for method in methods:
        analysis = registry.get(method)
        params = {"patch": (1, 2)} if analysis.param("patch") else {}
        plain = explain(loaded, method, image if analysis.needs_image else None, **params)
        with R.test_time_register(loaded, {0: [1, 2], 1: [3]}):
            moved = explain(loaded, method, image if analysis.needs_image else None, **params)
        assert moved.array.shape == plain.array.shape and np.isfinite(moved.array).any(), method
        if not analysis.needs_image:
            np.testing.assert_array_equal(moved.array, plain.array, err_msg=method)
        if method == "norms":
            names = list(moved.params["prefix_norms"])
            assert len(names) == own + 1 and names[own] == "test-time register"
    assert loaded.num_prefix_tokens == own and R.register_index(model) is None


def test_embed_with_registers_writes_the_registered_models_features(planted, tmp_path, capsys):
    """`embed FOLDER --registers F --out E.npz` writes every image's pooled features and logits of the model with the
    test-time register (1e-5), not the plain model's; without --out it is refused in one line."""
    from vitstudio.core.analysis.embeddings import pooled_features

    loaded, folder, x, model_folder = planted
    result, _ = _search(loaded, folder, detect_layer=-2, threshold=THRESHOLD, top_k=1)
    registers = R.write_registers(result, tmp_path / "reg.json")
    with R.test_time_register(loaded, result):
        features, logits = pooled_features(loaded, x)
    out = tmp_path / "e.npz"
    assert main(["embed", str(folder), "--model", str(model_folder), "--registers", str(registers), "--out",
                 str(out)]) == 0
    saved = np.load(out)
    order = [int(p.split("img")[-1].split(".")[0]) for p in saved["paths"]]
    np.testing.assert_allclose(saved["features"], features[order], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(saved["logits"], logits[order], rtol=1e-5, atol=1e-5)
    assert np.abs(pooled_features(loaded, x)[0][order] - saved["features"]).max() > 1e-3
    capsys.readouterr()
    assert main(["embed", str(folder), "--model", str(model_folder), "--registers", str(registers)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "--out" in err and len(err.splitlines()) == 1
