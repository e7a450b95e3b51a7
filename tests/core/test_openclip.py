"""CLIP-style models through OpenCLIP (issue 23): tiny random models built from configs here, saved the way the hub
stores them (open_clip_config.json + open_clip_model.safetensors / open_clip_pytorch_model.bin), checked against
OpenCLIP's own zero-shot computation and against an independent float64 implementation of the text map."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_model

from tests.conftest import imported_on_use
from vitstudio.core.analysis import registry
from vitstudio.core.analysis.explain import explain
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import classify
from vitstudio.core.models.loading import ModelLoadError, load_model
from vitstudio.core.models.openclip import text_side
from vitstudio.core.models.zeroshot import parse_classes, with_classes

open_clip = imported_on_use("open_clip")  # 1.5 s of import: only where these tests run

TEXT = {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}
# CLIP-style: OpenCLIP's own VisionTransformer (converted to timm's on load), softmax over classes
CLIP_CFG = {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16,
                                            "patch_size": 8}, "text_cfg": TEXT}
# SigLIP-style: a timm trunk with an attention-pool head (as ViT-B-16-SigLIP), a learned bias, sigmoid per class
SIGLIP_CFG = {"embed_dim": 64, "init_logit_bias": -1.0, "custom_text": True,
              "vision_cfg": {"image_size": 160, "timm_model_name": "test_vit", "timm_model_pretrained": False,
                             "timm_pool": "map", "timm_proj": "none"}, "text_cfg": TEXT}
NAMES = ["an astronaut", "a cat", "a cup of coffee"]


def _build(cfg: dict, folder: Path, safetensors: bool, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    cls = open_clip.CustomTextCLIP if cfg.get("custom_text") else open_clip.CLIP
    model = cls(**{k: v for k, v in cfg.items() if k != "custom_text"}).eval()
    with torch.no_grad():  # random weights with some spread (OpenCLIP zero-inits a few)
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    folder.mkdir(parents=True)
    preprocess = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bicubic"}
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": cfg, "preprocess_cfg": preprocess}))
    if safetensors:
        save_model(model, str(folder / "open_clip_model.safetensors"))
    else:
        torch.save(model.state_dict(), folder / "open_clip_pytorch_model.bin")
    return folder


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    return _build(CLIP_CFG, tmp_path_factory.mktemp("oc") / "tiny-clip", safetensors=True)


@pytest.fixture(scope="module")
def siglip_dir(tmp_path_factory) -> Path:
    return _build(SIGLIP_CFG, tmp_path_factory.mktemp("oc") / "tiny-siglip", safetensors=False)


def _openclip_probs(folder: Path, x: torch.Tensor, names, templates) -> torch.Tensor:
    """OpenCLIP's own zero-shot computation, from its own loading of the folder."""
    model = open_clip.create_model(f"local-dir:{folder}").eval()
    tokenizer = open_clip.get_tokenizer(f"local-dir:{folder}")
    with torch.no_grad():
        classifier = open_clip.build_zero_shot_classifier(model, tokenizer, names, templates, device="cpu")  # (D, C)
        image = model.encode_image(x, normalize=True)
        logits = model.logit_scale.exp() * image @ classifier
        if model.logit_bias is not None:
            return torch.sigmoid(logits + model.logit_bias)
        return logits.softmax(-1)


@pytest.mark.parametrize("which", ["clip", "siglip"])
@pytest.mark.parametrize("prompt", ["{}", None])
def test_zero_shot_probabilities_equal_openclips(which, prompt, clip_dir, siglip_dir, photos):
    """Zero-shot probs (single prompt or 80 ImageNet templates) equal OpenCLIP's build_zero_shot_classifier; softmax for
    CLIP, sigmoid for SigLIP, said in label_set; reference: OpenCLIP. [parametrised ×4]
    """
    folder = clip_dir if which == "clip" else siglip_dir
    loaded = with_classes(load_model(str(folder)), NAMES, prompt)
    images = [read_image(photos[n]) for n in ("astronaut", "chelsea", "coffee")]
    preds = classify(loaded, images, topk=len(NAMES))
    ours = torch.tensor([[dict(zip(p.indices, p.probs))[i] for i in range(len(NAMES))] for p in preds])
    x = torch.stack([loaded.to_tensor(loaded.crop(img)) for img in images])
    templates = ["{}"] if prompt else [t("{}") for t in open_clip.OPENAI_IMAGENET_TEMPLATES]  # 80, averaged
    reference = _openclip_probs(folder, x, NAMES, templates)
    torch.testing.assert_close(ours, reference.float(), atol=1e-5, rtol=0)
    if which == "siglip":  # a sigmoid per class, said so: the values are independent yes/no answers
        assert "sigmoid" in loaded.label_set and not torch.allclose(ours.sum(1), torch.ones(3), atol=1e-3)
    else:
        assert "softmax" in loaded.label_set
        torch.testing.assert_close(ours.sum(1), torch.ones(3))


def test_image_tower_is_the_models_own(clip_dir, siglip_dir, photos):
    """Loaded as a folder, as open_clip:DIR and as local-dir:DIR: the ViT gives OpenCLIP's image embedding.

    folder, `open_clip:DIR`, `open_clip:local-dir:DIR` load headless with image embeddings equal OpenCLIP's
    encode_image.
    """
    for folder in (clip_dir, siglip_dir):
        reference = open_clip.create_model(f"local-dir:{folder}").eval()
        for spec in (str(folder), f"open_clip:{folder}", f"open_clip:local-dir:{folder}"):
            loaded = load_model(spec)
            assert loaded.kind == "open_clip" and loaded.labels == [] and "OpenCLIP" in loaded.architecture
            x = loaded.to_tensor(loaded.crop(read_image(photos["coffee"])))[None]
            with torch.no_grad():
                torch.testing.assert_close(loaded.model(x), reference.encode_image(x), atol=1e-5, rtol=0)


def _reference_text_map(folder: Path, x: torch.Tensor, text: str) -> np.ndarray:
    """Chefer et al. 2021 generic rule in float64, written out on OpenCLIP's own modules (explicit attention, not
    timm's, not the app's capture): Ā = mean_h relu(∂s/∂A ⊙ A), R ← R + Ā R, s = cos(image, text)."""
    model = copy.deepcopy(open_clip.create_model(f"local-dir:{folder}")).double().eval()
    tokens = open_clip.get_tokenizer(f"local-dir:{folder}")([text])
    with torch.no_grad():
        t = torch.nn.functional.normalize(model.encode_text(tokens), dim=-1)[0]
    v = model.visual
    h = v.conv1(x.double()).flatten(2).transpose(1, 2)  # (1, P, W)
    h = torch.cat([v.class_embedding.expand(1, 1, -1), h], 1) + v.positional_embedding
    h = v.ln_pre(h)
    attentions = []
    for block in v.transformer.resblocks:
        y = block.ln_1(h)
        q, k, val = (y @ block.attn.in_proj_weight.T + block.attn.in_proj_bias).chunk(3, -1)
        heads = block.attn.num_heads
        q, k, val = (z.reshape(1, -1, heads, z.shape[-1] // heads).transpose(1, 2) for z in (q, k, val))
        a = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1)  # (1, H, N, N)
        attentions.append(a)
        out = (a @ val).transpose(1, 2).reshape(1, -1, h.shape[-1])
        h = h + block.attn.out_proj(out)
        h = h + block.mlp(block.ln_2(h))
    image = v.ln_post(h[:, 0]) @ v.proj
    score = torch.nn.functional.cosine_similarity(image[0], t, dim=0)
    grads = torch.autograd.grad(score, attentions)
    n = h.shape[1]
    r = torch.eye(n, dtype=torch.float64)
    for a, g in zip(attentions, grads):
        r = r + (g * a).clamp(min=0).mean(1)[0] @ r
    side = int(math.isqrt(n - 1))
    return r[0, 1:].reshape(side, side).detach().numpy()


def test_text_map_equals_float64_reference_and_depends_on_the_text(clip_dir, photos):
    """The text map equals a float64 Chefer rule on OpenCLIP's modules (written in the test); params record text and
    similarity; differs by text; temporary head removed.
    """
    loaded = load_model(str(clip_dir))
    image = read_image(photos["coffee"])
    x = loaded.to_tensor(loaded.crop(image))[None]
    maps = {}
    for text in ("a bee", "a cup of coffee"):
        exp = explain(loaded, "text", image, text=text)
        reference = _reference_text_map(clip_dir, x, text)
        np.testing.assert_allclose(exp.array, reference, rtol=1e-4, atol=1e-4 * np.abs(reference).max())
        assert exp.params["text"] == text and -1 <= exp.params["similarity"] <= 1
        maps[text] = exp.array
    assert not np.allclose(maps["a bee"], maps["a cup of coffee"], rtol=1e-3, atol=0)
    assert loaded.model.head.__class__.__name__ != "ZeroShotHead"  # the temporary similarity head is gone


@pytest.mark.parametrize("which", ["clip", "siglip"])
def test_every_image_analysis_runs_on_the_image_tower(which, clip_dir, siglip_dir, photos):
    """Headless refuses gradient-rollout until classes are given; then every applicable analysis (≥ 9 named) gives
    finite arrays. [parametrised ×2]
    """
    loaded = load_model(str(clip_dir if which == "clip" else siglip_dir))
    assert registry.get("gradient-rollout").why_not(loaded.model) is not None  # headless until classes are given
    loaded = with_classes(loaded, NAMES, "a photo of {}")
    image = read_image(photos["astronaut"])
    given = dict(patch=(1, 1), text="an astronaut")
    ran = set()
    for name, analysis in registry.REGISTRY.items():
        if analysis.why_not(loaded.model) is not None or any(p.kind == registry.FILE_KIND for p in analysis.params):
            continue  # a map of a file the user made (concepts): tests/gui/test_view_seams.py learns one for CLIP
        exp = explain(loaded, name, image if analysis.needs_image else None, **given)
        assert np.isfinite(exp.array).all(), name
        ran.add(name)
    expected = {"heads", "token", "rollout", "gradient-rollout", "text", "pca", "similarity", "norms", "distance"}
    assert expected <= ran, expected - ran


def test_unsupported_towers_are_refused_with_the_reason(tmp_path):
    """ResNet towers and attentional_pool are refused naming the reason."""
    for name, vision, message in (("resnet", {"layers": [1, 1, 1, 1], "width": 8}, "ResNet image tower"),
                                  ("pooler", {"layers": 2, "width": 32, "attentional_pool": True}, "attentional_pool")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": {**CLIP_CFG, "vision_cfg": vision}}))
        (folder / "open_clip_model.safetensors").write_bytes(b"")
        with pytest.raises(ModelLoadError, match=message):
            load_model(str(folder))


def test_uncached_openclip_model_gives_the_usual_offline_message():
    """Uncached OpenCLIP/hf-hub specs give the offline message; unknown architecture named."""
    for spec in ("open_clip:ViT-B-32:laion2b_s34b_b79k", "open_clip:hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K",
                 "hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K"):
        with pytest.raises(ModelLoadError, match="not in the local cache and HF_HUB_OFFLINE is set"):
            load_model(spec)
    with pytest.raises(ModelLoadError, match="Unknown OpenCLIP architecture"):
        load_model("open_clip:ViT-Q-99")


def test_hub_repo_in_openclip_layout_loads_from_the_cache(clip_dir):
    """An OpenCLIP-layout repo in a fake HF cache loads via `hf-hub:` and `open_clip:hf-hub:` with a text side."""
    from huggingface_hub import constants

    repo = Path(constants.HF_HUB_CACHE) / "models--someone--tiny-clip"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in clip_dir.iterdir():
        (snapshot / f.name).write_bytes(f.read_bytes())
    for spec in ("hf-hub:someone/tiny-clip", "open_clip:hf-hub:someone/tiny-clip"):
        loaded = load_model(spec)
        assert loaded.kind == "open_clip" and text_side(loaded.model) is not None


def test_text_embeddings_are_cached_per_model_and_prompts(clip_dir, monkeypatch):
    """Same classes/prompt encode text once (new uid each time); a new prompt re-encodes."""
    loaded = load_model(str(clip_dir))
    side = text_side(loaded.model)
    calls = []
    encode = side.clip.encode_text
    monkeypatch.setattr(side.clip, "encode_text", lambda tokens, **kw: calls.append(len(tokens)) or encode(tokens))
    loaded = with_classes(loaded, NAMES, "{}")
    uid = loaded.uid
    loaded = with_classes(loaded, NAMES, "{}")
    assert calls == [3] and loaded.uid != uid  # same prompts: no second pass; a new head: a new model identity
    loaded = with_classes(loaded, NAMES, "a photo of {}")
    assert calls == [3, 3]


def test_class_names_from_words_or_a_file(tmp_path):
    """`parse_classes` from comma list or file; fewer than two or repeats raise."""
    assert parse_classes("ant, bee,wasp ") == ["ant", "bee", "wasp"]
    (tmp_path / "classes.txt").write_text("red fox\narctic fox\n\n")
    assert parse_classes(str(tmp_path / "classes.txt")) == ["red fox", "arctic fox"]
    with pytest.raises(ValueError, match="at least two"):
        parse_classes("ant")
    with pytest.raises(ValueError, match="repeated: bee"):
        parse_classes("bee, ant, bee")


def test_cli_predict_and_explain_with_classes(clip_dir, photos, tmp_path, capsys):
    """`predict --classes file --prompt` equals core classify; `explain --method text` npy equals core, PNG is RGB;
    prompt without classes or one class is exit 2.
    """
    from vitstudio.cli import main

    (tmp_path / "classes.txt").write_text("\n".join(NAMES))
    rc = main(["predict", str(photos["chelsea"]), "--model", str(clip_dir), "--classes", str(tmp_path / "classes.txt"),
               "--prompt", "{}", "--json", "--topk", "3"])
    assert rc == 0
    top = json.loads(capsys.readouterr().out.splitlines()[0])["top"]
    loaded = with_classes(load_model(str(clip_dir)), NAMES, "{}")
    expected = classify(loaded, [read_image(photos["chelsea"])], topk=3)[0]
    assert [t["label"] for t in top] == list(expected.labels)
    assert [t["prob"] for t in top] == pytest.approx(expected.probs, abs=1e-6)
    out = tmp_path / "map.npy"
    assert main(["explain", str(photos["chelsea"]), "--model", f"open_clip:{clip_dir}", "--method", "text",
                 "--text", "a cat", "--out", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), explain(loaded, "text", read_image(photos["chelsea"]), text="a cat").array,
                               rtol=1e-5)
    picture = tmp_path / "map.png"
    assert main(["explain", str(photos["chelsea"]), "--model", str(clip_dir), "--method", "text", "--text", "a cat",
                 "--out", str(picture)]) == 0
    assert Image.open(picture).mode == "RGB"
    assert main(["predict", str(photos["chelsea"]), "--model", str(clip_dir), "--prompt", "{}"]) == 2
    assert main(["predict", str(photos["chelsea"]), "--model", str(clip_dir), "--classes", "cat"]) == 2
    assert "at least two" in capsys.readouterr().err


def test_digits_demo_still_works_without_openclip_weights(photos):
    """The demo model has no text side, classifies, refuses the text map and `with_classes`."""
    from vitstudio.core.models.demo import bundled_demo

    demo = bundled_demo()
    if demo is None:
        pytest.skip("the bundled demo model is not in this checkout")
    loaded = load_model(str(demo))
    assert text_side(loaded.model) is None and len(loaded.labels) == 10
    assert classify(loaded, [read_image(photos["coffee"])], topk=3)[0].ok
    assert "no text tower" in registry.get("text").why_not(loaded.model)
    with pytest.raises(ValueError, match="CLIP-style model"):
        with_classes(loaded, NAMES)


def test_catalog_lists_openclip_vit_towers_marked_by_cache(capsys):
    """Shipped listing equals `generate()` from installed open_clip; no ResNet towers; local only once in cache; `models
    --family open_clip` lists them all.
    """
    from huggingface_hub import constants

    from vitstudio.cli import main
    from vitstudio.core.models.catalog import family_of, list_catalog
    from vitstudio.core.models.openclip_catalog import generate, listed

    # the shipped listing is what the installed open_clip gives (regenerate with openclip_catalog.write_listing)
    assert list(listed()) == generate(lambda arch: bool(family_of(arch)))
    entries = list_catalog(family="open_clip")
    names = {e.name for e in entries}
    assert {"open_clip:ViT-B-32:openai", "open_clip:ViT-B-16-SigLIP:webli"} <= names
    assert not any(e.architecture.startswith("RN") for e in entries)  # ResNet towers are not listed
    assert not any(e.local for e in entries)  # ○ until the weights are in the cache, then ●
    repo = next(e for e in entries if e.name == "open_clip:ViT-B-32:openai").hf_hub_id
    snapshot = Path(constants.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    (snapshot / "open_clip_model.safetensors").write_bytes(b"")
    local = [e for e in list_catalog(family="open_clip") if e.local]
    assert "open_clip:ViT-B-32:openai" in {e.name for e in local} and {e.hf_hub_id for e in local} == {repo}
    assert main(["models", "--family", "open_clip", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(entries) and all(r["family"] == "open_clip" for r in rows)


def test_classes_make_a_new_model_sharing_the_tower(clip_dir, photos):
    """The model given classes shares the blocks (no second copy) and lock; the one it came from is unchanged."""
    headless = load_model(str(clip_dir))
    x = headless.to_tensor(headless.crop(read_image(photos["coffee"])))[None]
    with torch.no_grad():
        before = headless.model(x)
    zero_shot = with_classes(headless, NAMES, "{}")
    assert zero_shot.model is not headless.model and zero_shot.model.blocks is headless.model.blocks
    assert zero_shot.lock is headless.lock and headless.labels == [] and headless.model.num_classes == 0
    with torch.no_grad():
        torch.testing.assert_close(headless.model(x), before, atol=0, rtol=0)
        assert zero_shot.model(x).shape == (1, len(NAMES))


def test_uncached_hub_tokenizer_gives_the_offline_message(clip_dir, tmp_path):
    """SigLIP-style models name a Hugging Face tokenizer; offline and not cached, the load says so clearly."""
    folder = tmp_path / "hf-tokenizer"
    folder.mkdir()
    doc = json.loads((clip_dir / "open_clip_config.json").read_text())
    doc["model_cfg"]["text_cfg"]["hf_tokenizer_name"] = "someone/not-cached-tokenizer"
    (folder / "open_clip_config.json").write_text(json.dumps(doc))
    (folder / "open_clip_model.safetensors").write_bytes((clip_dir / "open_clip_model.safetensors").read_bytes())
    with pytest.raises(ModelLoadError, match="tokenizer .* not in the local cache.*HF_HUB_OFFLINE is set"):
        load_model(str(folder))


def test_faithfulness_of_the_text_map_follows_the_similarity_to_the_text(clip_dir, photos):
    """Deletion and insertion curves of the text map, checked against OpenCLIP's own image and text encoders on
    the same masked inputs: cos(encode_image(input at step i), encode_text(text))."""
    from vitstudio.core.analysis.faithfulness import Protocol, blurred, image_faithfulness, ranking, step_masks

    loaded = load_model(str(clip_dir))
    image = read_image(photos["coffee"])
    x = loaded.to_tensor(loaded.crop(image))[None]
    protocol = Protocol(steps=4, random_seeds=2)
    result = image_faithfulness(loaded, x, ["text"], protocol, text="a cup of coffee")
    assert result.score == "similarity to 'a cup of coffee'" and "text" in result.methods
    order = ranking(explain(loaded, "text", image, text="a cup of coffee").array.astype(np.float64))
    masks = step_masks(order, loaded.grid_size, loaded.patch_size, protocol.steps)
    deleted = x * ~masks
    inserted = torch.where(masks, x, blurred(x, protocol.sigma(loaded)))
    model = open_clip.create_model(f"local-dir:{clip_dir}").eval()
    tokens = open_clip.get_tokenizer(f"local-dir:{clip_dir}")(["a cup of coffee"])
    with torch.no_grad():
        text = model.encode_text(tokens, normalize=True)[0]
        expected = [(model.encode_image(inputs, normalize=True) @ text).numpy() for inputs in (deleted, inserted)]
    np.testing.assert_allclose(result.methods["text"].deletion, expected[0], atol=1e-5)
    np.testing.assert_allclose(result.methods["text"].insertion, expected[1], atol=1e-5)
    assert loaded.model.head is not None and not hasattr(loaded.model.head, "sigmoid")  # its own head is back


def test_faithfulness_cli_takes_a_text(clip_dir, photos, capsys):
    """`faithfulness --text` prints "curves follow: similarity to …" with a text row; `--sanity` with text is exit 2."""
    from vitstudio.cli import main

    args = ["faithfulness", str(photos["coffee"]), "--model", str(clip_dir), "--methods", "text,rollout",
            "--steps", "2", "--device", "cpu"]
    assert main([*args, "--text", "a cup of coffee"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("curves follow: similarity to 'a cup of coffee'") and "\ntext " in out
    assert main([*args, "--text", "a cup of coffee", "--sanity"]) == 2
    assert "--sanity re-draws the classifier" in capsys.readouterr().err


def test_a_bpe_tokenizer_is_made_once_and_each_model_gets_its_own(tmp_path):
    """CLIP's BPE tokenizer is made once a process for a text config (~0.15 s of CPU a load): two folders with the
    same config get tokenizers that tokenize as OpenCLIP's own, share its tables and keep memos of their own; a
    folder whose config is rewritten (another context length) gets a tokenizer of the new one."""
    from vitstudio.core.models.openclip import _tokenizer

    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
        (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": CLIP_CFG}))
    first, second = (_tokenizer(f"local-dir:{f}", str(f)) for f in folders)
    reference = open_clip.get_tokenizer(f"local-dir:{folders[0]}")
    assert first is not second and first.bpe_ranks is second.bpe_ranks and first.cache is not second.cache
    for tokenizer in (first, second):
        assert torch.equal(tokenizer(NAMES), reference(NAMES)) and tokenizer(NAMES).shape == (3, 16)
    (folders[0] / "open_clip_config.json").write_text(json.dumps(
        {"model_cfg": {**CLIP_CFG, "text_cfg": {**TEXT, "context_length": 24}}}))
    assert _tokenizer(f"local-dir:{folders[0]}", "a")(NAMES).shape == (3, 24)
