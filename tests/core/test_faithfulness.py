"""Deletion / insertion faithfulness (Petsiuk et al. 2018) against a plain transcription of the protocol written
here: one input at a time, pixels zeroed patch by patch in loops, numpy's trapezoid rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from tests.conftest import make_tiny_vit
from tests.core.reference_vit import sharpen, wrap
from vitstudio.core.analysis import faithfulness as fa
from vitstudio.core.analysis.explain import explain
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.models.loading import load_model


def _trapezoid(y) -> float:
    y = np.asarray(y, dtype=np.float64)
    return float(np.sum((y[1:] + y[:-1]) / 2) * (1.0 / (len(y) - 1)))


def _prob(model, x, cls) -> float:
    with torch.no_grad():
        return float(torch.softmax(model(x).double(), -1)[0, cls])


def reference_deletion(model, x, values, steps, patch):
    """The protocol, spelled out: target = top-1; rank by value desc, ties by index; zero round(i·P/S) patches."""
    with torch.no_grad():
        target = int(model(x).argmax())
    gh, gw = values.shape
    flat = values.ravel().tolist()
    order = sorted(range(gh * gw), key=lambda k: (-flat[k], k))
    probs = []
    for i in range(steps + 1):
        xi = x.clone()
        for k in order[:round(i * gh * gw / steps)]:
            r, c = divmod(k, gw)
            xi[:, :, r * patch:(r + 1) * patch, c * patch:(c + 1) * patch] = 0.0
        probs.append(_prob(model, xi, target))
    return _trapezoid(probs), probs


def _tiny():
    return wrap(sharpen(make_tiny_vit(seed=3)), (32, 32))


def _demo():
    folder = bundled_demo()
    if folder is None:
        pytest.skip("the bundled demo model is not in this checkout")
    return load_model(str(folder), device="cpu", precision="fp32")


def _digits(n: int) -> list[Image.Image]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    out = []
    for pixels in digits.images[-n:]:  # the last scans
        ink = (255 - pixels / 16.0 * 255).astype(np.uint8)
        out.append(Image.fromarray(ink, "L").resize((32, 32), Image.BILINEAR).convert("RGB"))
    return out


@pytest.mark.parametrize("make", [_tiny, _demo], ids=["tiny-vit", "demo"])
@pytest.mark.parametrize("method", ["rollout", "gradient-rollout"])
def test_deletion_equals_the_protocol_written_out(make, method, rgb_image):
    """Deletion curve and AUC for rollout/gradient-rollout equal reference_deletion (patch-by-patch zeroing, trapezoid
    rule), on a tiny ViT and the bundled demo; target = top-1. [parametrised ×4]
    """
    loaded = make()
    image = _digits(1)[0] if loaded.num_classes == 10 else rgb_image
    x = loaded.to_tensor(loaded.crop(image))[None]
    values = explain(loaded, method, image).array
    steps = 8 if loaded.num_classes == 10 else 16  # 64 patches in 8 steps; 16 patches in 16 steps
    expected, expected_curve = reference_deletion(loaded.model, x, values, steps, loaded.patch_size[0])
    result = fa.image_faithfulness(loaded, x, [method], fa.Protocol(steps=steps, batch_size=5))
    got = result.methods[method]
    assert len(got.deletion) == steps + 1
    np.testing.assert_allclose(got.deletion, expected_curve, atol=1e-5)
    assert got.deletion_auc == pytest.approx(expected, abs=1e-4)
    assert result.target == int(loaded.model(x).argmax())


def test_rounding_and_ties_follow_the_protocol():
    """Ranking breaks ties by index; step masks remove round(i·P/S) patches (halves to even)."""
    # 6 patches in 4 steps: round(0), round(1.5)=2, round(3)=3, round(4.5)=4, round(6)=6 (halves to even)
    order = fa.ranking(np.array([[1.0, 3.0, 3.0], [0.0, 2.0, 3.0]]))
    assert order.tolist() == [1, 2, 5, 4, 0, 3]
    masks = fa.step_masks(order, (2, 3), (1, 1), 4)[:, 0]
    assert [int(m.sum()) for m in masks] == [0, 2, 3, 4, 6]
    assert masks[1].flatten().tolist() == [False, True, True, False, False, False]


def test_random_baseline_is_the_mean_of_five_seeded_permutations():
    """The random baseline AUC is the mean of 5 seeded permutations; curves start/end at the unmodified probability."""
    loaded = _tiny()
    x = torch.randn(1, 3, 32, 32)
    protocol = fa.Protocol(steps=4)
    result = fa.image_faithfulness(loaded, x, [], protocol)
    target = result.target
    aucs = [fa.curves(loaded, x, np.random.default_rng(s).permutation(16), target, protocol).deletion_auc
            for s in range(5)]
    assert result.random.deletion_auc == pytest.approx(np.mean(aucs), abs=1e-9)
    assert result.random.deletion[0] == pytest.approx(_prob(loaded.model, x, target), abs=1e-6)
    assert result.random.insertion[-1] == pytest.approx(_prob(loaded.model, x, target), abs=1e-6)  # all restored


def _single_patch_effects(loaded, x, target, start):
    """Per patch: the drop in the target's probability when that patch alone is zeroed, and the gain when that
    patch alone is restored into the blurred start (all P variants in one batch)."""
    gh, gw = loaded.grid_size
    p = loaded.patch_size[0]
    deleted, inserted = x.repeat(gh * gw, 1, 1, 1), start.repeat(gh * gw, 1, 1, 1)
    for k in range(gh * gw):
        r, c = divmod(k, gw)
        cut = (k, slice(None), slice(r * p, (r + 1) * p), slice(c * p, (c + 1) * p))
        deleted[cut] = 0.0
        inserted[cut] = x[0][cut[1:]]
    with torch.no_grad():
        probs = torch.softmax(loaded.model(torch.cat([x, start, deleted, inserted])).double(), -1)[:, target].numpy()
    base, blur, drop, gain = probs[0], probs[1], probs[2:2 + gh * gw], probs[2 + gh * gw:]
    return (base - drop).reshape(gh, gw), (gain - blur).reshape(gh, gw)


def test_an_oracle_ranking_beats_random_on_deletion_and_insertion():
    """An oracle ranking from single-patch effects beats random on deletion and insertion for every demo digit, and
    reversed it is worse than the oracle.
    """
    loaded = _demo()
    protocol = fa.Protocol(steps=16)
    wins_del = wins_ins = 0
    images = _digits(4)
    for image in images:
        x = loaded.to_tensor(loaded.crop(image))[None]
        start = fa.blurred(x, protocol.sigma(loaded))
        target = int(loaded.model(x).argmax())
        drop, gain = _single_patch_effects(loaded, x, target, start)
        result = fa.image_faithfulness(loaded, x, [], protocol)
        oracle_del = fa.curves(loaded, x, fa.ranking(drop), target, protocol)
        oracle_ins = fa.curves(loaded, x, fa.ranking(gain), target, protocol)
        wins_del += oracle_del.deletion_auc < result.random.deletion_auc
        wins_ins += oracle_ins.insertion_auc > result.random.insertion_auc
        # and the oracle reversed is worse than random
        assert fa.curves(loaded, x, fa.ranking(drop)[::-1], target, protocol).deletion_auc > oracle_del.deletion_auc
    assert wins_del == len(images) and wins_ins == len(images)


def test_a_folder_summary_counts_images_beating_random(tmp_path):
    """`faithfulness_over` a folder reports results, one error for a broken file, progress; `summarise`
    mean/std/beats-random match numpy.
    """
    loaded = _demo()
    paths = []
    for i, image in enumerate(_digits(3)):
        image.save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    (tmp_path / "broken.png").write_bytes(b"not an image")
    gen = fa.faithfulness_over(loaded, paths + [str(tmp_path / "broken.png")], ["rollout"], fa.Protocol(steps=8))
    progress = []
    try:
        while True:
            progress.append(next(gen))
    except StopIteration as stop:
        results, errors = stop.value
    assert len(results) == 3 and len(errors) == 1 and progress[-1].done == 3
    table = fa.summarise(results)
    dele = [r.methods["rollout"].deletion_auc for r in results]
    rand = [r.random.deletion_auc for r in results]
    assert table["rollout"].deletion_mean == pytest.approx(np.mean(dele))
    assert table["rollout"].deletion_std == pytest.approx(np.std(dele))
    assert table["rollout"].beats_random_deletion == pytest.approx(np.mean(np.array(dele) < np.array(rand)))
    assert table["random"].images == 3


def test_a_method_that_gives_several_maps_is_reported_not_fatal():
    """`heads` (several maps) is reported in errors ("patch grid") while rollout still runs."""
    loaded = _tiny()
    x = torch.randn(1, 3, 32, 32)
    result = fa.image_faithfulness(loaded, x, ["heads", "rollout"], fa.Protocol(steps=4))
    assert "rollout" in result.methods and "heads" not in result.methods
    assert "patch grid" in result.errors["heads"]


def test_the_insertion_start_is_torchvisions_gaussian_blur_even_when_wider_than_the_image():
    """`blurred` equals torchvision GaussianBlur (kernel 2⌈3σ⌉+1, clipped to 63); reference: torchvision."""
    from torchvision.transforms import GaussianBlur

    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(fa.blurred(x, 2.0), GaussianBlur(13, 2.0)(x))  # kernel 2·⌈3σ⌉+1
    wide = fa.blurred(x, 40.0)  # kernel clipped to 63 (reflect padding stays inside the 32-pixel image)
    torch.testing.assert_close(wide, GaussianBlur(63, 40.0)(x))
    assert wide.std() < 0.2 * x.std()  # nearly flat: the image's detail is gone
