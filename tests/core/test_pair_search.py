"""The near-duplicate check's pair searches at scale: faiss's binary index finds exactly the hash pairs of the blocked
products (and of brute force), its IVF range search finds the planted cosine pairs the exact search finds and never
a pair below the cut, and dropping the thumbnail search loses no group (a near pair needs two of three signals, so the
hash or the feature search always finds it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from vitstudio.core.folder import duplicates as D
from vitstudio.core.folder import pair_search as P
from vitstudio.core.folder.fingerprints import Fingerprints
from vitstudio.core.folder.keyedstore import RowView

faiss = pytest.importorskip("faiss")  # a dependency; the exact fallbacks are tested by taking it away below


def _pairs(found) -> set[tuple[int, int]]:
    return set(zip(found[0].tolist(), found[1].tolist()))


def test_hamming_pairs_from_faiss_equal_the_blocked_products_and_brute_force(monkeypatch):
    """faiss's binary range search, the torch fallback and a brute-force Hamming table in the test give the same pairs
    (mirror both ways, a symmetric image not its own pair, seven identical hashes all paired).
    """
    rng = np.random.default_rng(3)
    bits = rng.random((1200, 64)) < 0.5
    mirror = rng.random((1200, 64)) < 0.5
    bits[10] = bits[11] ^ (np.arange(64) < 4)  # 4 bits apart
    mirror[20] = bits[21] ^ (np.arange(64) == 9)  # 20 mirrored is 21, 1 bit apart
    mirror[30] = bits[30]  # a symmetric image is its own mirror: not a pair
    bits[40:46] = bits[39]  # six identical hashes: every pair of the seven
    got = P.hamming_pairs(bits, mirror, 5)
    monkeypatch.setattr(P, "faiss_module", lambda: None)
    blocked = P.hamming_pairs(bits, mirror, 5)
    direct = (bits[:, None] != bits[None]).sum(-1)
    flipped = np.minimum((bits[:, None] != mirror[None]).sum(-1), (mirror[:, None] != bits[None]).sum(-1))
    i, j = np.triu_indices(len(bits), 1)
    want = {(a, b) for a, b in zip(i.tolist(), j.tolist()) if min(direct[a, b], flipped[a, b]) <= 5}
    assert _pairs(got) == _pairs(blocked) == want
    assert {(10, 11), (20, 21), (39, 45)} <= want and not any(30 in p for p in want)


def _clustered(n: int, dim: int, planted: int, seed: int = 0) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """Unit features in 40 tight clusters (as a classifier puts a class) with `planted` near-copies (cosine ~0.9999)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, dim))
    x = centres[rng.integers(0, 40, n)] + 0.35 * rng.normal(size=(n, dim))
    copies = rng.choice(n, (planted, 2), replace=False)
    x[copies[:, 1]] = x[copies[:, 0]] + 0.01 * rng.normal(size=(planted, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), {(int(min(a, b)), int(max(a, b))) for a, b in copies}


def test_ivf_cosine_pairs_find_the_planted_copies_and_nothing_below_the_cut():
    """The IVF range search (forced) finds exactly the exact search's pairs at a near-duplicate cut, values equal the
    true cosines; at a loose cut (thousands of pairs) recall ≥ 0.99 and nothing below the cut.
    """
    x, planted = _clustered(3000, 48, 100)
    sims = x @ x.T
    cut = 0.999
    exact = P.cosine_pairs(x, cut)  # 3,000 ≤ EXACT_LIMIT: the blocked products
    ivf = P.cosine_pairs(x, cut, exact_limit=0)  # forced onto the IVF index
    assert planted <= _pairs(exact) and _pairs(ivf) == _pairs(exact)
    np.testing.assert_allclose(ivf[2], sims[ivf[0], ivf[1]], atol=1e-5)
    # a looser cut (every pair within a cluster's dense core): the probe's recall, measured, not assumed
    loose = float(np.quantile(np.sort(sims, 1)[:, -2], 0.5))
    exact, ivf = _pairs(P.cosine_pairs(x, loose)), _pairs(P.cosine_pairs(x, loose, exact_limit=0))
    assert len(exact) > 1000 and ivf <= exact | {p for p in ivf if sims[p] >= loose - 1e-5}
    assert len(ivf & exact) / len(exact) >= 0.99


def test_cosine_pairs_without_faiss_are_the_exact_ones(monkeypatch):
    """Without faiss the exact products answer beyond the limit too and find the planted copies."""
    x, planted = _clustered(800, 16, 20, seed=1)
    monkeypatch.setattr(P, "faiss_module", lambda: None)
    assert planted <= _pairs(P.cosine_pairs(x, 0.999, exact_limit=0))


@pytest.mark.parametrize("with_faiss", [True, False])
def test_nearest_similarity_skips_the_image_itself_and_its_own_mirror(monkeypatch, with_faiss):
    """In parts of 256 searched rows (the 300 rows' self matches fall in either part), from tensors or from a
    cache's row views: the best similarity to another row, as the whole product says.

    The calibration's nearest similarity (faiss and torch) equals a full matrix with its diagonal removed, searched in
    parts of 256 rows and from a cache's row views: a twin's 1.0 kept, an image's own mirror not its neighbour; a sample
    gives the same figures; the hashes' nearest distance in bits (faiss's popcounts or the signs) equals the signs' full
    matrix. [parametrised ×2]
    """
    if not with_faiss:
        monkeypatch.setattr(P, "faiss_module", lambda: None)
    monkeypatch.setattr(P, "SEARCHED_BYTES", 1)  # the smallest part: 256 rows
    rng = np.random.default_rng(2)
    x = P.unit_rows(rng.normal(size=(300, 16)))
    x[5] = x[4]  # a tie with the image itself: the best other is that twin
    y = P.unit_rows(rng.normal(size=(300, 16)))
    y[7] = x[7]  # an image that is its own mirror: not its own neighbour
    cases = ((P.nearest_similarity(x, y), torch.maximum(x @ x.T, x @ y.T)), (P.nearest_similarity(x), x @ x.T),
             (P.nearest_similarity(x, y, sample=50), None))
    for best, full in cases:
        if full is None:  # a sample of the rows: the same figures for those rows
            assert len(best) == 50 and set(best.tolist()) <= set(P.nearest_similarity(x, y).tolist())
            continue
        full.fill_diagonal_(-np.inf)
        np.testing.assert_allclose(best, full.max(1).values.numpy(), atol=1e-5)
    assert P.nearest_similarity(x)[4] == pytest.approx(1.0, abs=1e-5)
    viewed = P.nearest_similarity(RowView(np.concatenate([x, y], 1), None, slice(0, 16)),
                                  RowView(np.concatenate([x, y], 1), None, slice(16, 32)))
    np.testing.assert_array_equal(viewed, P.nearest_similarity(x, y))
    # the hashes' calibration, in bits: the ±1 signs' nearest similarity, from popcounts where faiss is there
    bits, mirror = rng.random((300, 64)) < 0.5, rng.random((300, 64)) < 0.5
    bits[9] = bits[8] ^ (np.arange(64) < 2)
    mirror[3] = bits[3]  # its own mirror: not its neighbour
    signs = [torch.from_numpy(b).float() * 2 - 1 for b in (bits, mirror)]
    want = (64 - torch.maximum(signs[0] @ signs[0].T, signs[0] @ signs[1].T).fill_diagonal_(-np.inf).max(1).values) / 2
    np.testing.assert_array_equal(P.nearest_hamming(bits, mirror), want.numpy())
    assert P.nearest_hamming(bits, mirror)[8] == 2


def test_two_signals_find_every_group_without_a_thumbnail_search(tmp_path):
    """Seven images, fixed cuts (too few to calibrate): pairs that agree on pixels + features, pixels + hash,
    hash + features are each a group; an image that agrees with one on features only joins none."""
    rng = np.random.default_rng(5)
    paths = []
    for k in range(7):
        paths.append(str(tmp_path / f"{k}.png"))
        Image.fromarray(rng.integers(0, 255, (8 + k, 8, 3), dtype=np.uint8)).save(paths[-1])  # distinct bytes
    bits = rng.random((7, 64)) < 0.5
    thumbs = rng.normal(size=(7, 256)).astype(np.float32)
    feats = rng.normal(size=(7, 32)).astype(np.float32)
    thumbs[1], feats[1] = thumbs[0], feats[0]  # 0-1: pixels + features (hashes ~32 bits apart)
    thumbs[3], bits[3] = thumbs[2], bits[2]  # 2-3: pixels + hash
    bits[5], feats[5] = bits[4], feats[4]  # 4-5: hash + features (thumbnails alike, below the cut: as a hash match is)
    thumbs[5] = thumbs[4] + 0.6 * rng.normal(size=256)
    feats[6] = feats[0]  # 6 with 0 and 1: features only
    mirrored = rng.normal(size=(7, 256)).astype(np.float32)
    thumbs, mirrored = (t / np.linalg.norm(t, axis=1, keepdims=True) for t in (thumbs, mirrored))
    fp = Fingerprints(np.arange(7), bits, ~bits, thumbs, mirrored)
    groups, thresholds, _ = D.find_groups(paths, fp, feats, np.arange(7))
    assert thresholds.pixels_why.startswith("fixed")
    found = sorted(sorted(g.paths) for g in groups)
    assert found == [[paths[0], paths[1]], [paths[2], paths[3]], [paths[4], paths[5]]]


def test_faiss_is_imported_without_its_loaders_lines(tmp_path, monkeypatch, caplog):
    """faiss's loader logs each build it cannot load (AVX512-SPR, AVX512, AVX2) with its ModuleNotFoundError: three
    lines on stderr at each folder open in the window, whose logging shows INFO. The one place faiss is imported keeps
    that logger quiet while it loads (a stand-in faiss that logs as the loader does), and leaves its level as it was."""
    import logging
    import sys

    fake = tmp_path / "faiss"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "import logging\nlog = logging.getLogger('faiss.loader')\nlog.info('Loading faiss with AVX2 support.')\n"
        "log.info('Could not load library with AVX2 support due to:')\n"
        "log.warning(\"ModuleNotFoundError(\\\"No module named 'faiss.swigfaiss_avx2'\\\")\")\n")
    monkeypatch.setitem(sys.modules, "faiss", None)  # put back as it was once the test ends, stand-in or not
    monkeypatch.delitem(sys.modules, "faiss")
    monkeypatch.syspath_prepend(str(tmp_path))
    caplog.set_level(logging.DEBUG)
    assert P.faiss_module().__file__ == str(fake / "__init__.py")
    assert [r.getMessage() for r in caplog.records if r.name == "faiss.loader"] == []
    assert logging.getLogger("faiss.loader").level == logging.NOTSET
