"""Masks from maps (DINO's visualize_attention): the kept share of the mass, checked against a sort written here,
and the PNG / COCO RLE files read back."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from vitstudio.cli import main
from vitstudio.core.analysis import masks
from vitstudio.core.analysis.explain import explain
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model


def read_png(path) -> np.ndarray:
    """A mask PNG as booleans, read by Pillow (not by the code under test)."""
    return np.asarray(Image.open(path).convert("L")) > 127


def rle_decode(rle: dict) -> np.ndarray:
    """A COCO compressed RLE as booleans, decoded by pycocotools (the format's own library)."""
    from pycocotools import mask as coco

    return coco.decode({"size": rle["size"], "counts": rle["counts"].encode("ascii")}).astype(bool)


def dino_threshold(values: np.ndarray, share: float) -> np.ndarray:
    """DINO's code, transcribed: sort ascending, normalise, keep where the cumulative sum exceeds 1 - share."""
    flat = values.ravel()
    idx = np.argsort(flat, kind="stable")
    val = flat[idx] / flat.sum()
    keep_sorted = np.cumsum(val) > 1 - share
    keep = np.zeros_like(keep_sorted)
    keep[idx] = keep_sorted
    return keep.reshape(values.shape)


@pytest.mark.parametrize("share", [0.6, 0.3, 0.9, 1.0])
def test_kept_mass_share_is_the_smallest_top_set_reaching_the_share(share):
    """`mass_mask` keeps the smallest top set reaching the share, reports the kept share; reference: DINO's threshold
    transcribed in the test. [parametrised ×4]
    """
    rng = np.random.default_rng(1)
    values = rng.gamma(0.5, size=(4, 7, 7))  # peaky positive maps, one per "head"
    got, kept = masks.mass_mask(values, share)
    assert got.shape == values.shape and kept.shape == (4,)
    for head in range(4):
        v, m = values[head], got[head]
        share_kept = v[m].sum() / v.sum()
        assert kept[head] == pytest.approx(share_kept, abs=1e-6)
        assert share_kept >= share - 1e-6
        assert v[m].sum() - v[m].min() < share * v.sum()  # dropping the weakest kept cell falls below the share
        assert v[m].min() >= v[~m].max(initial=-np.inf)  # the highest cells are kept
        np.testing.assert_array_equal(m, dino_threshold(v, share))


def test_negative_values_carry_no_mass_and_bad_shares_are_refused():
    """Negative cells carry no mass; share > 1 raises ValueError."""
    values = np.array([[3.0, -5.0], [1.0, 0.0]])
    got, kept = masks.mass_mask(values, 0.6)
    assert got.tolist() == [[True, False], [False, False]] and kept == pytest.approx(0.75)
    with pytest.raises(ValueError, match="share"):
        masks.mass_mask(values, 1.5)


def test_png_and_rle_round_trip(tmp_path):
    """Upsampling to pixels, PNG and RLE round trips (through JSON); RLE counts equal pycocotools' encoding of
    column-major runs; reference: pycocotools.
    """
    rng = np.random.default_rng(0)
    mask = rng.random((5, 6)) > 0.5
    pixels = masks.to_pixels(mask, (20, 24))
    assert pixels.shape == (20, 24) and np.array_equal(pixels[::4, ::4], mask)
    (tmp_path / "m.png").write_bytes(masks.png_bytes(pixels))
    np.testing.assert_array_equal(read_png(tmp_path / "m.png"), pixels)
    rle = json.loads(json.dumps(masks.rle_encode(pixels)))  # survives JSON
    np.testing.assert_array_equal(rle_decode(rle), pixels)
    # COCO's uncompressed run lengths, written out: column-major runs starting with zeros
    flat = pixels.ravel(order="F").astype(int)
    runs, current, n = [], 0, 0
    for v in flat:
        if v != current:
            runs.append(n)
            current, n = v, 0
        n += 1
    runs.append(n)
    from pycocotools import mask as coco

    uncompressed = coco.frPyObjects({"size": [20, 24], "counts": runs}, 20, 24)
    assert uncompressed["counts"].decode() == rle["counts"]


def mask_on_the_image(mask: np.ndarray, image, loaded) -> np.ndarray:
    """The patch mask drawn over the image where the model's crop came from, from timm's eval transform as
    published (resize the short side to floor(size / crop_pct), centre-crop size), nothing outside it."""
    import math

    size, crop_pct = loaded.input_hw[0], loaded.data_config["crop_pct"]
    h, w = image.height, image.width
    short = math.floor(size / crop_pct)  # torchvision: the short side to this, the long one int(short * long / short)
    rh, rw = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
    sy, sx = h / rh, w / rw  # the image's pixels per resized pixel, each axis its own
    ch, cw = round(size * sy), round(size * sx)
    top, left = round(round((rh - size) / 2) * sy), round(round((rw - size) / 2) * sx)  # CenterCrop's corner

    def blocks(picture) -> np.ndarray:  # 8×8 means: resampling detail apart, the same part of the photo
        return np.asarray(picture.convert("L").resize((8, 8), Image.BOX), float)

    seen = blocks(loaded.crop(image))
    part = np.abs(blocks(image.crop((left, top, left + cw, top + ch))) - seen).mean()
    assert part < 10 and part < np.abs(blocks(image) - seen).mean()  # that part is what the model saw
    out = np.zeros((h, w), dtype=bool)
    out[top:top + ch, left:left + cw] = masks.to_pixels(mask, (ch, cw))
    return out


def test_explain_mask_writes_png_and_coco_json(tiny_weights, photos, tmp_path):
    """`explain --mask 0.6` writes per-image mask PNGs and a COCO JSON whose segmentation/area/kept_share match core
    `mass_mask`, drawn at the photo's own size where the model's crop lies (torchvision's resize + centre-crop rule,
    written out in the test; checked against the crop's pixels), the COCO image record the photo's size (the walk: a
    512×512 photo's mask was a 32×32 image of the same name); a method without a map (pca) is exit 2.
    """
    out = tmp_path / "masks"
    images = [str(photos["chelsea"]), str(photos["astronaut"])]
    assert main(["explain", *images, "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--method", "rollout",
                 "--mask", "0.6", "--out", str(out)]) == 0
    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    doc = json.loads((out / "rollout.masks.json").read_text())
    assert [i["file_name"] for i in doc["images"]] == ["chelsea.png", "astronaut.jpg"]
    for image, annotation, record in zip(images, doc["annotations"], doc["images"]):
        values = explain(loaded, "rollout", read_image(image)).array
        expected = mask_on_the_image(masks.mass_mask(values, 0.6)[0], read_image(image), loaded)
        assert (record["height"], record["width"]) == expected.shape  # the image named, not the 32-px crop (walk)
        name = image.rsplit("/", 1)[1]
        png = np.asarray(Image.open(out / f"{name}.rollout.mask.png")) > 127
        np.testing.assert_array_equal(png, expected)
        np.testing.assert_array_equal(rle_decode(annotation["segmentation"]), expected)
        assert annotation["area"] == int(expected.sum())
        assert annotation["kept_share"] >= 0.6
    assert main(["explain", images[0], "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--method", "pca",
                 "--mask", "0.6", "--out", str(tmp_path / "m2")]) == 2  # no map over the image: refused
