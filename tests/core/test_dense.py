"""Dense tasks from patch features (issue 52): segmentation by retrieval against a transcription of
open-hummingbird-eval's memory, retrieval and voting; matching maps against cosine similarity of features computed
here by running the blocks by hand; planted shapes segmented from five painted images; both CLI commands end to end."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from pycocotools import mask as coco_mask

from tests.core.generators import drain
from tests.core.planted_shapes import mean_iou, planted_folder
from vitstudio.cli import main
from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.concepts.tokens import collect_tokens
from vitstudio.core.dense import matching
from vitstudio.core.dense.painted import UNPAINTED
from vitstudio.core.dense.retrieval import build_bank, farthest_points, pixel_labels, unit_rows, vote
from vitstudio.core.dense.segment import SegmentSettings, segment_folder
from vitstudio.core.models.loading import load_model

SPEC = "custom:img=64,patch=8,width=32,depth=2,heads=2,classes=2"  # an 8×8 grid; crop_pct 0.9: 71 px -> 64


@pytest.fixture(scope="module")
def loaded():
    torch.manual_seed(0)
    return load_model(SPEC, None, "cpu", "fp32")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """25 planted images of 48×64 (the crop: their middle 48×48) and their true masks."""
    root = tmp_path_factory.mktemp("planted")
    return root, planted_folder(root / "images", 25)


# -- open-hummingbird-eval, transcribed from hbird/hbird_eval.py (vpariza/open-hummingbird-eval @ 5e79da2) --------
def hbird_memory(features: torch.Tensor, y: torch.Tensor, num_classes: int, patch_size: int):
    """_create_memory, unbounded (lines 308-325): y (B, 1, H, W) class ids; _patchify_gt (lines 569-573)."""
    bs, c, h, w = y.shape
    gt = y.reshape(bs, c, h // patch_size, patch_size, w // patch_size, patch_size).permute(0, 2, 4, 1, 3, 5)
    gt = gt.reshape(bs, h // patch_size, w // patch_size, c * patch_size * patch_size)
    label = F.one_hot(gt, num_classes=num_classes).float().mean(dim=3)
    normalized = features / torch.norm(features, dim=2, keepdim=True)
    return normalized.flatten(0, 1), label.flatten(0, 2)


def hbird_segment(features: torch.Tensor, memory: torch.Tensor, labels: torch.Tensor, k: int, h: int, w: int,
                  side: int, beta: float = 0.02):
    """evaluate (lines 223-243): faiss IndexFlatIP's exact top-k on the raw queries (search_faiss.py:44,89),
    _find_nearest_key_to_query (lines 624-637), _cross_attention (lines 593-609), bilinear, argmax."""
    b, n, d = features.shape
    idx = (features.reshape(b * n, d) @ memory.T).topk(k, dim=1).indices
    key_features = memory.index_select(0, idx.flatten()).view(b, n, k, -1)
    key_labels = labels.index_select(0, idx.flatten()).view(b, n, k, -1)
    q, kf = F.normalize(features, dim=-1), F.normalize(key_features, dim=-1)
    attn = torch.bmm(q.reshape(b * n, 1, d), kf.reshape(b * n, k, d).transpose(1, 2)).squeeze(1) / beta
    attn = F.softmax(attn, dim=-1)
    label_hat = torch.bmm(attn.unsqueeze(1), key_labels.reshape(b * n, k, -1)).squeeze(1).view(b, n, -1)
    grid = label_hat.reshape(b, side, side, -1).permute(0, 3, 1, 2)
    return label_hat, F.interpolate(grid.float(), size=(h, w), mode="bilinear").argmax(dim=1)


def test_retrieval_equals_open_hummingbird_eval_on_the_same_features(loaded, tmp_path):
    """Whole 71×71 images (the model's crop is their exact middle 64×64, no resampling): the memory bank from fully
    painted masks equals hbird's memory, and the patch logits (1e-5) and pixel labels equal its retrieval's.

    On the same cached tokens saved to disk, the memory bank from fully painted masks equals a transcription of
    open-hummingbird-eval's `_create_memory` (unit features, per-patch one-hot mean), and the patch logits (1e-5), their
    argmax and the bilinear pixel labels equal its exact inner-product top-k + `_cross_attention` + interpolate (k 30, β
    0.02); pixels outside the crop are 255.
    """
    rng = np.random.default_rng(1)
    folder = tmp_path / "images"
    truth = planted_folder(folder, 8, size=(71, 71), seed=3)
    paths = sorted(truth)
    tokens = drain(collect_tokens(loaded, paths, 1))
    np.save(tmp_path / "features.npy", tokens.of_images(np.arange(len(paths))))  # the features, saved to disk
    features = torch.from_numpy(np.load(tmp_path / "features.npy"))  # (8, 64, 32)
    top, left, h, w = loaded.crop_box((71, 71))
    assert (h, w) == (64, 64)
    masks = [truth[p] * rng.integers(1, 3) for p in paths]  # classes 0, 1, 2: the shape is 1 or 2 per image
    crops = torch.from_numpy(np.stack([m[top:top + 64, left:left + 64] for m in masks]).astype(np.int64))[:, None]
    memory, labels = hbird_memory(features[:5], crops[:5], 3, 8)

    from vitstudio.core.dense.painted import patch_shares

    shares = [patch_shares(m, (top, left, h, w), (8, 8), (8, 8), 3) for m in masks[:5]]
    bank = build_bank(features[:5].reshape(-1, 32).numpy(), np.concatenate([s for s, _ in shares]), ("a", "b", "c"))
    assert all(keep.all() for _, keep in shares)
    np.testing.assert_allclose(bank.features, memory.numpy(), atol=1e-6)
    np.testing.assert_allclose(bank.labels, labels.numpy(), atol=1e-7)
    expected, pixels = hbird_segment(features[5:], memory, labels, 30, 64, 64, 8)
    ours = vote(features[5:].reshape(-1, 32).numpy(), bank, k=30, temperature=0.02).reshape(3, 64, 3)
    np.testing.assert_allclose(ours, expected.numpy(), atol=1e-5)
    assert (ours.argmax(-1) == expected.numpy().argmax(-1)).all()
    for i in range(3):
        placed = pixel_labels(ours[i].reshape(8, 8, 3), (71, 71), (top, left, h, w))
        assert (placed[top:top + 64, left:left + 64] == pixels[i].numpy()).all()
        assert (placed[:top] == UNPAINTED).all() and (placed[:, :left] == UNPAINTED).all()


def _by_hand(loaded, image: Image.Image, layer: int) -> dict[str, torch.Tensor]:
    """(64, C) token, key and query of block `layer`, by running timm's blocks one by one (no forward_intermediates,
    no hooks): keys and queries from the block's own qkv projection on its norm1 input."""
    model = loaded.model
    x = loaded.to_tensor(loaded.crop(image))[None]
    with torch.no_grad():
        t = model.norm_pre(model._pos_embed(model.patch_embed(x)))
        for block in model.blocks[:layer]:
            t = block(t)
        attn = model.blocks[layer].attn
        qkv = attn.qkv(model.blocks[layer].norm1(t)).reshape(1, t.shape[1], 3, -1)
        out = model.blocks[layer](t)
    prefix = model.num_prefix_tokens
    return {"token": out[0, prefix:], "query": qkv[0, prefix:, 0], "key": qkv[0, prefix:, 1]}


@pytest.mark.parametrize("facet", matching.FACETS)
def test_match_map_is_the_cosine_of_the_blocks_features(loaded, planted, facet):
    """The map of a patch of A over B equals the cosine computed here; the best match is the map's highest patch
    (its centre, placed back on B), and a patch is its own mutual match between an image and itself.

    For the token, key and query facets, the similarity map of a patch of A over B equals the cosine of features
    computed by running timm's blocks by hand (keys/queries from the block's own qkv on norm1), 1e-5; the best match is
    the highest patch's centre placed back on B; an image against itself has every patch as its own mutual match; the
    refined match (--refine) is the most similar pixel around the best patch when both images' features are upsampled
    with F.interpolate (as DIFT) and the point's own feature is read off A's. [parametrised ×3]
    """
    _, truth = planted
    a_path, b_path = sorted(truth)[:2]
    a_img, b_img = (Image.open(p).convert("RGB") for p in (a_path, b_path))
    a, b = matching.facet_features(loaded, [a_img, b_img], 0, facet)
    fa, fb = _by_hand(loaded, a_img, 0)[facet], _by_hand(loaded, b_img, 0)[facet]
    for patch in ((0, 0), (3, 5), (7, 7)):
        expected = F.cosine_similarity(fa[patch[0] * 8 + patch[1]][None], fb, dim=-1).reshape(8, 8).numpy()
        sim = matching.similarity_map(a, b, patch)
        np.testing.assert_allclose(sim, expected, atol=1e-5)
        (x, y), value = matching.best_match(sim, b)
        r, c = np.unravel_index(expected.argmax(), expected.shape)
        top, left, h, w = b.box
        assert value == pytest.approx(expected.max(), abs=1e-5)
        assert (x, y) == pytest.approx((left + (c + 0.5) * w / 8 - 0.5, top + (r + 0.5) * h / 8 - 0.5))
    pairs = matching.mutual_matches(a, a, top=64)
    assert len(pairs) == 64 and all(p["a"] == p["b"] for p in pairs)
    # refined: B's features upsampled to the crop (F.interpolate, as DIFT), the point's own from A's upsampled map
    up_a, up_b = (F.interpolate(f.reshape(1, 8, 8, -1).permute(0, 3, 1, 2), size=(64, 64), mode="bilinear",
                                align_corners=False)[0] for f in (fa, fb))
    (top, left, h, w), (b_top, b_left, b_h, b_w) = a.box, b.box
    x, y = left + 20.5 * w / 64 - 0.5, top + 27.5 * h / 64 - 0.5  # the centre of crop pixel (20, 27): patch (3, 2)
    sim = matching.similarity_map(a, b, (3, 2))
    r, c = np.unravel_index(sim.argmax(), sim.shape)
    window = F.cosine_similarity(up_b, up_a[:, 27, 20][:, None, None], dim=0)[max(0, r - 1) * 8:(r + 2) * 8,
                                                                                max(0, c - 1) * 8:(c + 2) * 8]
    v, u = np.unravel_index(int(window.argmax()), window.shape)
    (row,) = matching.match_points(a, b, [(x, y)], refine=True)
    u, v = max(0, c - 1) * 8 + u + 0.5, max(0, r - 1) * 8 + v + 0.5  # B's crop pixel centre, placed on B below
    assert row["match"] == pytest.approx([b_left + u * b_w / 64 - 0.5, b_top + v * b_h / 64 - 0.5], abs=0.01)
    assert row["similarity"] == pytest.approx(float(window.max()), abs=1e-5)


def test_a_block_without_separate_keys_refuses_the_key_facet():
    """BEiT keeps q and v biases beside one qkv weight and no q/k norms to read: one sentence, token still works.

    BEiT's attention (no q/k norms to read): one sentence for key, none for token, and an unknown facet is named; the
    registry's Key/query similarity is greyed for it with the same sentence.
    """
    import timm

    beit = timm.create_model("beit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                             depth=1, num_heads=2)
    vit = SimpleNamespace(model=beit)
    assert "no separate keys" in matching.facet_refusal(vit, 0, "key")
    assert matching.facet_refusal(vit, 0, "token") is None and "not 'value'" in matching.facet_refusal(vit, 0, "value")
    assert "no separate keys" in why_not(beit, "facet-similarity")  # the registry's entry is greyed with it


def test_the_key_query_similarity_entry_is_the_cosine_within_one_image(loaded, planted):
    """The registry's facet-similarity (what Attention and explain show): one patch's key or query against every
    patch's of the same image, equal to the cosine of the block's own qkv computed here.

    The registry's facet-similarity (Attention, explain): one patch's key or query against every patch's of the same
    image equals the cosine of the block's own qkv on norm1 computed in the test (1e-5), for both facets.
    """
    from vitstudio.core.analysis.explain import explain

    image = Image.open(sorted(planted[1])[0]).convert("RGB")
    for facet in ("key", "query"):
        f = _by_hand(loaded, image, 0)[facet]
        expected = F.cosine_similarity(f[3 * 8 + 5][None], f, dim=-1).reshape(8, 8).numpy()
        exp = explain(loaded, "facet-similarity", image, layer=0, patch=(3, 5), facet=facet)
        np.testing.assert_allclose(exp.array, expected, atol=1e-5)


def test_five_painted_images_segment_planted_shapes(loaded, planted, tmp_path):
    """Five painted images (their true masks) segment the other 20 with mIoU ≥ 0.8 over the crop's pixels.

    Five painted images (true masks) segment the other 20 planted images with mIoU ≥ 0.8 over the crop; the painted
    images keep their painted pixels.
    """
    root, truth = planted
    paths = sorted(truth)
    painted = tmp_path / "painted"
    painted.mkdir()
    for p in paths[:5]:
        Image.fromarray(truth[p]).save(painted / f"{Path(p).stem}.png")
    result = drain(segment_folder(loaded, str(root / "images"), str(painted), tmp_path / "out"))
    assert [r.file for r in result.images] == paths and result.classes == ("background", "object")
    predicted = [np.asarray(Image.open(r.mask)) for r in result.images[5:]]
    score = mean_iou(predicted, [truth[p] for p in paths[5:]])
    assert score >= 0.8, score
    assert all((np.asarray(Image.open(r.mask)) == truth[r.file]).all() for r in result.images[:5])  # painted stand


def test_a_capped_bank_keeps_the_farthest_points_and_says_so():
    """Farthest-point capping equals the greedy written from its definition, the bank's note says how many patches were
    kept of how many and how; random capping keeps the cap; an uncapped bank says nothing.
    """
    rng = np.random.default_rng(0)
    x = unit_rows(rng.normal(size=(200, 8)))
    bank = build_bank(x, np.ones((200, 2)) / 2, ("a", "b"), cap=12, method="farthest", seed=4)
    kept = [int(np.random.default_rng(4).integers(200))]  # the greedy, written from its definition
    while len(kept) < 12:
        kept.append(int(np.argmin((x @ x[kept].T).max(1))))
    assert farthest_points(x, 12, 4).tolist() == kept
    np.testing.assert_allclose(bank.features, x[kept], atol=1e-6)
    assert "200 painted patches" in bank.note and "kept 12" in bank.note and "farthest-point" in bank.note
    assert len(build_bank(x, np.ones((200, 2)), ("a", "b"), cap=50)) == 50
    assert build_bank(x, np.ones((200, 2)), ("a", "b")).note == ""


def _painted(planted, tmp_path, count: int = 2) -> tuple[Path, list[str]]:
    root, truth = planted
    paths = sorted(truth)
    folder = tmp_path / "painted"
    folder.mkdir(exist_ok=True)
    for p in paths[:count]:
        mask = np.full(truth[p].shape, UNPAINTED, np.uint8)
        mask[truth[p] == 1] = 1
        mask[:6] = 0  # a strip of background painted along the top
        Image.fromarray(mask).save(folder / f"{Path(p).stem}.png")
    return folder, paths


def test_segment_and_match_from_the_command_line(loaded, planted, tmp_path, capsys):
    """`vitstudio segment` writes the core's masks (a PNG per image at its size, class indices) and one JSON line per
    image; `vitstudio match --json` gives the core's matches.

    `vitstudio segment --json` writes the core's masks (a PNG per image at its size) and per-image class shares, one
    JSON line per image; `--coco` writes each image's classes as COCO RLE that pycocotools decodes back to the PNG's
    pixels, `--csv` each image's shares; `vitstudio match --json` gives the core's matches and mutual pairs.
    """
    root, truth = planted
    painted, paths = _painted(planted, tmp_path)
    torch.manual_seed(0)  # the same random weights as the fixture's model
    code = main(["segment", str(root / "images"), "--model", SPEC, "--masks", str(painted), "--classes", "bg,shape",
                 "--k", "10", "--out", str(tmp_path / "cli"), "--json", "--coco", "--csv", "--quiet", "--device",
                 "cpu"])
    out = capsys.readouterr()
    assert code == 0, out.err
    records = [json.loads(line) for line in out.out.splitlines()]
    expected = drain(segment_folder(loaded, str(root / "images"), str(painted), tmp_path / "core",
                                    SegmentSettings(("bg", "shape"), k=10)))
    assert [r["file"] for r in records] == paths and len(list((tmp_path / "cli").glob("*.png"))) == len(paths)
    coco = json.loads((tmp_path / "cli" / "masks.coco.json").read_text())
    with open(tmp_path / "cli" / "areas.csv", newline="") as f:
        areas = list(csv.reader(f))
    assert areas[0] == ["file", "bg", "shape"] and [c["name"] for c in coco["categories"]] == ["bg", "shape"]
    for i, (record, core) in enumerate(zip(records, expected.images)):
        cli_mask, core_mask = np.asarray(Image.open(record["mask"])), np.asarray(Image.open(core.mask))
        assert cli_mask.shape == truth[record["file"]].shape and (cli_mask == core_mask).all()
        assert record["shares"] == core.shares and set(record["shares"]) == {"bg", "shape"}
        assert areas[i + 1] == [record["file"], *(str(v) for v in record["shares"].values())]
        annotations = [a for a in coco["annotations"] if a["image_id"] == i + 1]
        assert sorted(a["category_id"] for a in annotations) == sorted(int(k) + 1 for k in np.unique(cli_mask)
                                                                        if k < 2)
        for a in annotations:  # pycocotools' own decoder gives back the class's pixels
            raw = {"size": a["segmentation"]["size"], "counts": a["segmentation"]["counts"].encode("ascii")}
            assert (coco_mask.decode(raw) == (cli_mask == a["category_id"] - 1)).all()
    torch.manual_seed(0)
    code = main(["match", paths[0], paths[1], "--model", SPEC, "--points", "20,20;40,30", "--refine", "--json",
                 "--device", "cpu"])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    a, b = matching.facet_features(loaded, [Image.open(p).convert("RGB") for p in paths[:2]])
    assert doc["points"] == matching.match_points(a, b, [(20, 20), (40, 30)], refine=True)
    assert doc["mutual"] == matching.mutual_matches(a, b, 10) and doc["layer"] == 1


def _spoil(case: str, painted: Path, paths: list[str]) -> list[str]:
    first = painted / f"{Path(paths[0]).stem}.png"
    if case == "size":
        Image.new("L", (10, 10), 0).save(first)
    elif case == "no-image":
        Image.new("L", (64, 48), 0).save(painted / "nobody.png")
    elif case == "rgb":
        Image.new("RGB", (64, 48)).save(first)
    return {"unpainted-class": ["--classes", "bg,shape,sky"], "inside": ["--out", str(Path(paths[0]).parent / "o")],
            "k": ["--k", "0"]}.get(case, [])


BAD = {"size": "the image changed since it was painted", "no-image": "names no image of the folder",
       "rgb": "one class index per pixel", "unpainted-class": "no pixel of class 'sky' (2) is painted",
       "inside": "is inside the folder being segmented", "k": "--k is the neighbours"}


@pytest.mark.parametrize("case", [*BAD, "points", "outside"])
def test_bad_dense_inputs_are_one_line_and_write_nothing(case, planted, tmp_path, capsys):
    """A painted mask of the wrong size, naming no image, in RGB, a class never painted, --out inside the folder, --k 0,
    malformed --points, a point outside the crop: exit 2, one line, nothing written. [parametrised ×8]
    """
    painted, paths = _painted(planted, tmp_path, 1)
    if case in ("points", "outside"):
        points = {"points": "12;4", "outside": "1,1"}[case]  # x 1 lies left of the 48×48 crop of a 64 px width
        code = main(["match", paths[0], paths[1], "--model", SPEC, "--points", points, "--device", "cpu"])
        err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("note: ")]
        says = {"points": "--points takes x,y pairs", "outside": "outside the part of the image the model sees"}
        assert code == 2 and len(err) == 1 and says[case] in err[0], err
        return
    extra = _spoil(case, painted, paths)
    out = ["--out", str(tmp_path / "out")] if "--out" not in extra else []
    code = main(["segment", str(Path(paths[0]).parent), "--model", SPEC, "--masks", str(painted), *out, *extra,
                 "--quiet", "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if not line.startswith("note: ")]
    assert code == 2 and len(lines) == 1 and BAD[case] in lines[0], (code, err)
    assert not (tmp_path / "out").exists() and not (Path(paths[0]).parent / "o").exists()


def test_a_full_disk_while_writing_masks_is_one_line_naming_the_file(planted, tmp_path, monkeypatch, capsys):
    """The masks are written on several threads: a write that fails still stops the command in one line (exit 1)
    naming the mask, and the masks written before it are whole.

    The masks are written on several threads (fsync'd each): a full disk at one mask stops `segment` in one line naming
    it (exit 1), no temp file left, the masks written before it whole.
    """
    from vitstudio.core import files

    painted, paths = _painted(planted, tmp_path, 1)
    monkeypatch.setattr(files, "_passes", {})
    monkeypatch.setenv("VITSTUDIO_FULL_AT", "before-rename-img-003.png")
    code = main(["segment", str(Path(paths[0]).parent), "--model", SPEC, "--masks", str(painted), "--out",
                 str(tmp_path / "out"), "--quiet", "--device", "cpu"])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("note: ")]
    assert code == 1 and len(err) == 1 and "could not write" in err[0] and "img-003.png" in err[0], err
    assert not (tmp_path / "out" / "img-003.png").exists() and not list((tmp_path / "out").glob(".*.tmp"))
    assert all(Image.open(p).size == (64, 48) for p in (tmp_path / "out").glob("*.png"))


def test_masks_painted_and_written_inside_the_folder_are_not_its_images(planted, tmp_path, capsys):
    """PAINTED_DIR inside FOLDER, and --out-inside: neither folder's PNGs are segmented as images (their stems would
    collide with the images'), and a second run over the same folder gives the same masks."""
    import shutil

    _, truth = planted
    folder = tmp_path / "images"
    folder.mkdir()
    for p in sorted(truth)[:4]:
        shutil.copy(p, folder)
    painted, _ = _painted(planted, folder, 1)  # folder/painted
    args = ["segment", str(folder), "--model", SPEC, "--masks", str(painted), "--out", str(folder / "masks"),
            "--out-inside", "--json", "--quiet", "--device", "cpu"]
    torch.manual_seed(0)  # the spec's random weights, the same both times
    assert main(args) == 0
    first = capsys.readouterr().out
    torch.manual_seed(0)
    assert main(args) == 0 and capsys.readouterr().out == first
    assert [Path(json.loads(line)["file"]).name for line in first.splitlines()] == [Path(p).name for p in
                                                                                     sorted(truth)[:4]]
