"""Dense tasks (issue 52): segmentation by retrieval from a few painted images beside a linear probe on the same patch
features and pixels, point matching under known transforms by block and facet, and the time to segment a folder
beside the time to embed it.

    python tests/benchmarks/segment.py [--skip-miou] [--skip-pck] [--skip-speed] [--images 1000]

miou   planted shapes (tests/core/planted_shapes.py: a red disc or square on crops of texture photos), 20 images to
       paint from and 100 held out; mIoU over the held-out crops' pixels from 1, 5 and 20 painted images (their true
       masks), by block, for retrieval (k 30, temperature 0.02: hbird's defaults) and for sklearn's LogisticRegression
       fitted on the same patches (those at least half painted, each labelled by its majority class) whose class
       probabilities are upsampled the same way. Models: a tiny random ViT (64 px, patch 8) and the bundled demo.
pck    skimage photos, each paired with itself shifted by one patch, mirrored, scaled ×1.25 and cropped to its
       central 75 %; every patch centre of A whose true place in B lies in B's crop is matched; PCK@0.1: the share
       within 0.1 × the image's side, by block and facet (token, key, query), best patch and refined (--refine).
speed  N rendered digits through the demo model, 5 painted (ink = object): `segment_folder` cold (tokens read) and
       warm (tokens cached) beside `embed_folder` cold on the same folder (goal ≤ 3× and ≤ 1.5×), and the re-segment
       of one image after a brush stroke (its shares, the bank rebuilt, the image voted and upsampled; goal ≤ 200 ms).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.core.generators import drain  # noqa: E402 (the repository root is on the path first)
from tests.core.planted_shapes import mean_iou, planted_folder  # noqa: E402

TINY = "custom:img=64,patch=8,width=32,depth=2,heads=2,classes=2"


def _load(spec: str):
    import torch

    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    torch.manual_seed(0)
    return load_model(str(bundled_demo()) if spec == "demo" else spec, None, "cpu", "fp32")


def _patches(loaded, tokens, index, masks):
    """(features, shares, kept) of the images `index` of `tokens` with their masks, patch by patch."""
    from vitstudio.core.dense.painted import patch_shares

    feats, shares, kept = [], [], []
    for i, mask in zip(index, masks):
        s, k = patch_shares(mask, loaded.crop_box(mask.shape), tokens.grid, loaded.patch_size, 2)
        feats.append(tokens.of_images(np.array([i]))[0])
        shares.append(s)
        kept.append(k)
    return np.concatenate(feats), np.concatenate(shares), np.concatenate(kept)


def _pixels(loaded, grid, logits, masks):
    from vitstudio.core.dense.retrieval import pixel_labels

    per = grid[0] * grid[1]
    return [pixel_labels(logits[i * per:(i + 1) * per].reshape(*grid, -1), m.shape, loaded.crop_box(m.shape))
            for i, m in enumerate(masks)]


def miou_rows(spec: str, folder: Path) -> list[tuple]:
    from sklearn.linear_model import LogisticRegression

    from vitstudio.core.concepts.tokens import collect_tokens
    from vitstudio.core.dense.retrieval import build_bank, vote

    loaded = _load(spec)
    truth = planted_folder(folder / spec.split(":")[0], 120, seed=7)
    paths = sorted(truth)
    masks = [truth[p] for p in paths]
    rows = []
    for layer in range(loaded.token_depth):
        tokens = drain(collect_tokens(loaded, paths, layer))
        test = list(range(20, 120))
        queries = tokens.of_images(np.array(test)).reshape(-1, tokens.width)
        test_masks = [masks[i] for i in test]
        for n in (1, 5, 20):
            feats, shares, kept = _patches(loaded, tokens, range(n), masks[:n])
            bank = build_bank(feats[kept], shares[kept], ("background", "object"))
            t = time.perf_counter()
            retrieved = _pixels(loaded, tokens.grid, vote(queries, bank), test_masks)
            seconds = time.perf_counter() - t
            probe = LogisticRegression(max_iter=2000).fit(feats[kept], shares[kept].argmax(1))
            probed = _pixels(loaded, tokens.grid, probe.predict_proba(queries), test_masks)
            rows.append((spec.split(":")[0], layer, n, len(bank), mean_iou(retrieved, test_masks),
                         mean_iou(probed, test_masks), seconds))
        rows += _capped(loaded, tokens, masks, queries, test_masks, spec, layer)
    return rows


def _capped(loaded, tokens, masks, queries, test_masks, spec, layer) -> list[tuple]:
    """The 20 painted images' bank capped to 10 % by random and by farthest-point sampling (the probe column: the
    uncapped bank's retrieval, for the ratio)."""
    from vitstudio.core.dense.retrieval import build_bank, vote

    feats, shares, kept = _patches(loaded, tokens, range(20), masks[:20])
    whole = mean_iou(_pixels(loaded, tokens.grid, vote(queries, build_bank(feats[kept], shares[kept], ("b", "o"))),
                             test_masks), test_masks)
    rows = []
    for method in ("random", "farthest"):
        bank = build_bank(feats[kept], shares[kept], ("b", "o"), cap=int(kept.sum()) // 10, method=method)
        ours = mean_iou(_pixels(loaded, tokens.grid, vote(queries, bank), test_masks), test_masks)
        label = f"20/{'fps' if method == 'farthest' else 'rnd'}"
        rows.append((spec.split(":")[0], layer, label, len(bank), ours, whole, 0.0))
    return rows


def _pairs(side: int, patch: int) -> list[tuple[str, np.ndarray, np.ndarray, callable]]:
    """(transform, A, B, A's (x, y) -> B's) for each photo and transform; A is side × side."""
    from skimage import data

    out = []
    for name in ("astronaut", "chelsea", "coffee", "rocket", "brick", "camera"):
        photo = np.asarray(getattr(data, name)())
        photo = np.stack([photo] * 3, -1) if photo.ndim == 2 else photo[..., :3]
        a = np.asarray(Image.fromarray(photo).resize((side, side), Image.BICUBIC))
        up = int(round(side * 1.25))
        off = (up - side) // 2
        scaled = np.asarray(Image.fromarray(a).resize((up, up), Image.BICUBIC))[off:off + side, off:off + side]
        c = (side - int(side * 0.75)) // 2
        out += [("shift", a, np.roll(a, (patch, patch), (0, 1)), lambda x, y: (x + patch, y + patch)),
                ("flip", a, a[:, ::-1].copy(), lambda x, y: (side - 1 - x, y)),
                ("scale", a, np.ascontiguousarray(scaled), lambda x, y, o=off: ((x + 0.5) * 1.25 - 0.5 - o,
                                                                              (y + 0.5) * 1.25 - 0.5 - o)),
                ("crop", a, a[c:side - c, c:side - c].copy(), lambda x, y, c=c: (x - c, y - c))]
    return out


def _pck(loaded, pairs, layer: int, facet: str, refine: bool) -> dict[str, float]:
    from vitstudio.core.dense.matching import facet_features, match_points

    hits: dict[str, list[bool]] = {}
    for kind, a_img, b_img, to_b in pairs:
        a, b = facet_features(loaded, [Image.fromarray(a_img), Image.fromarray(b_img)], layer, facet)
        (top, left, h, w), (bt, bl, bh, bw) = a.box, b.box
        gh, gw = a.grid
        points = [(left + (c + 0.5) * w / gw - 0.5, top + (r + 0.5) * h / gh - 0.5) for r in range(gh)
                  for c in range(gw)]
        points = [p for p in points if bl <= to_b(*p)[0] < bl + bw and bt <= to_b(*p)[1] < bt + bh]
        for p, row in zip(points, match_points(a, b, points, refine)):
            tx, ty = to_b(*p)
            hits.setdefault(kind, []).append(np.hypot(row["match"][0] - tx, row["match"][1] - ty)
                                             <= 0.1 * max(b_img.shape[:2]))
    return {k: float(np.mean(v)) for k, v in hits.items()}


def pck_rows(spec: str) -> list[tuple]:
    from vitstudio.core.dense.matching import FACETS, facet_refusal

    loaded = _load(spec)
    side = int(round(loaded.input_hw[0] / loaded.data_config.get("crop_pct", 1.0)))  # the crop: A's middle, 1:1
    pairs = _pairs(side, loaded.patch_size[0])
    rows = []
    for layer in range(loaded.token_depth):
        for facet in FACETS:
            if facet_refusal(loaded, layer, facet):
                continue
            for refine in (False, True):
                rows.append((spec.split(":")[0], layer, facet, refine, _pck(loaded, pairs, layer, facet, refine)))
    return rows


def speed(images: int, folder: Path) -> dict:
    from vitstudio.core.dense.segment import segment_folder
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.models.demo import render_digits

    loaded = _load("demo")
    data = render_digits(folder / "digits", per_class=images // 10)
    files = sorted(str(p) for p in data.rglob("*.png"))
    painted = folder / "painted"
    painted.mkdir()
    for f in files[:5]:  # ink (dark) is the object, paper the background
        Image.fromarray((np.asarray(Image.open(f).convert("L")) < 128).astype(np.uint8)).save(
            painted / f"{Path(f).stem}.png")
    timings = {}
    for name, job in (("embed cold", lambda: embed_folder(loaded, [str(data)])),
                      ("segment cold", lambda: segment_folder(loaded, str(data), str(painted), folder / "o1")),
                      ("segment warm", lambda: segment_folder(loaded, str(data), str(painted), folder / "o2")),
                      ("embed warm", lambda: embed_folder(loaded, [str(data)]))):
        t = time.perf_counter()
        result = drain(job())
        timings[name] = time.perf_counter() - t
    timings["images"] = len(result.paths)
    timings["stroke ms"] = _stroke_ms(loaded, files[:5], painted)
    return timings


def _stroke_ms(loaded, files: list[str], painted: Path) -> float:
    """One image re-segmented after a stroke: its shares, the bank of the five rebuilt, the image voted and placed."""
    from vitstudio.core.concepts.tokens import collect_tokens
    from vitstudio.core.dense.retrieval import build_bank, vote

    tokens = drain(collect_tokens(loaded, files, loaded.token_depth - 1))
    masks = [np.asarray(Image.open(painted / f"{Path(f).stem}.png")) for f in files]
    times = []
    for _ in range(20):
        t = time.perf_counter()
        feats, shares, kept = _patches(loaded, tokens, range(len(files)), masks)
        bank = build_bank(feats[kept], shares[kept], ("background", "object"))
        _pixels(loaded, tokens.grid, vote(tokens.of_images(np.array([0]))[0], bank), masks[:1])
        times.append(time.perf_counter() - t)
    return 1000 * float(np.median(times))


def _print_miou(rows) -> None:
    print("\nmIoU on 100 held-out planted images (crop pixels), retrieval (k 30, T 0.02) beside a linear probe "
          "(rows 20/rnd, 20/fps: the bank capped to 10 % by random or farthest-point sampling, beside the uncapped "
          "bank's retrieval)")
    print(f"{'model':<8} {'block':>5} {'painted':>7} {'bank':>6} {'retrieval':>9} {'probe':>7} {'ratio':>6}")
    for model, layer, n, bank, ours, probe, _ in rows:
        print(f"{model:<8} {layer:>5} {n:>7} {bank:>6} {ours:9.3f} {probe:7.3f} {ours / max(probe, 1e-9):6.2f}")


def _print_pck(rows) -> None:
    print("\nPCK@0.1 of best matches (6 photos; all patch centres whose place in B is in B's crop)")
    print(f"{'model':<8} {'block':>5} {'facet':<6} {'refine':<6} " + " ".join(f"{k:>6}" for k in
                                                                         ("shift", "flip", "scale", "crop")))
    for model, layer, facet, refine, pck in rows:
        print(f"{model:<8} {layer:>5} {facet:<6} {str(refine):<6} " + " ".join(f"{pck[k]:6.3f}" for k in
                                                                          ("shift", "flip", "scale", "crop")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1000)
    for stage in ("miou", "pck", "speed"):
        parser.add_argument(f"--skip-{stage}", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VITSTUDIO_CACHE_DIR"] = str(Path(tmp) / "cache")  # cold caches, and none left behind
        if not args.skip_miou:
            _print_miou([r for spec in (TINY, "demo") for r in miou_rows(spec, Path(tmp))])
        if not args.skip_pck:
            _print_pck([r for spec in (TINY, "demo") for r in pck_rows(spec)])
        if not args.skip_speed:
            t = speed(args.images, Path(tmp))
            print(f"\n{t['images']} digits, demo model, CPU: embed cold {t['embed cold']:.2f} s (warm "
                  f"{t['embed warm']:.2f} s); segment after painting 5: cold {t['segment cold']:.2f} s "
                  f"(×{t['segment cold'] / t['embed cold']:.2f} of embedding, goal ≤ 3), tokens cached "
                  f"{t['segment warm']:.2f} s (×{t['segment warm'] / t['embed cold']:.2f}, goal ≤ 1.5); re-segment "
                  f"after a stroke {t['stroke ms']:.1f} ms (goal ≤ 200)")


if __name__ == "__main__":
    main()
