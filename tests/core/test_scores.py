"""The brain's scores (core/folder/scores.py) against transcriptions of fiftyone-brain's own code
(voxel51/fiftyone-brain at 7238036, fiftyone/brain/internal/core/), run on the same embeddings and logits."""

from __future__ import annotations

from math import exp

import numpy as np
import pytest

from tests.conftest import imported_on_use
from vitstudio.core.folder import scores

# the references, imported where these tests run (1.4 s of import in each process collecting the file)
scipy_special, scipy_stats = imported_on_use("scipy.special"), imported_on_use("scipy.stats")


@pytest.fixture(scope="module")
def embeddings():
    """120 embeddings in 6 loose clusters, a few far from every other, and one exact pair."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 3, (6, 16))
    x = centres[rng.integers(0, 6, 120)] + rng.normal(0, 1, (120, 16))
    x[:4] *= 4.0
    x[10] = x[11]
    return x.astype(np.float32)


def fiftyone_uniqueness(embeddings):
    """sklearn.py:814-836 (`_build_neighbors`, metric "cosine") + uniqueness.py:159-192 (its NearestNeighbors path)."""
    import sklearn.neighbors as skn
    import sklearn.preprocessing as skp

    embeddings = np.asarray(embeddings).copy()
    embeddings -= embeddings.mean(axis=0, keepdims=True)
    embeddings = skp.normalize(embeddings, axis=1)
    neighbors = skn.NearestNeighbors(metric="euclidean").fit(embeddings)
    dists, _ = neighbors.kneighbors(X=embeddings, n_neighbors=3 + 1, return_distance=True)
    dists = np.array(list(dists))
    weights = [0.6, 0.3, 0.1]
    sample_dists = np.mean(dists[:, 1:] * weights, axis=1)
    sample_dists /= sample_dists.max()
    return sample_dists


def fiftyone_representativeness(embeddings):
    """representativeness.py:186-231 (`_cluster_ranker`, kmeans, N=20, norm_method "local")."""
    import sklearn.cluster as skc

    clusterer = skc.KMeans(n_clusters=20, random_state=1234).fit(embeddings)
    cluster_centers = clusterer.cluster_centers_
    cluster_ids = clusterer.labels_
    sample_dists = np.linalg.norm(embeddings - cluster_centers[cluster_ids], axis=1)
    for unique_id in np.unique(cluster_ids):
        cluster_indices = np.where(cluster_ids == unique_id)[0]
        cluster_dists = sample_dists[cluster_indices]
        cluster_dists /= cluster_dists.max()
        sample_dists[cluster_indices] = cluster_dists
    return sample_dists


def fiftyone_mistakenness(logits, m):
    """mistakenness.py:529-536 (`_compute_mistakenness_class`)."""
    m = m * -2.0 + 1.0
    c = -1.0 * scipy_stats.entropy(scipy_special.softmax(np.asarray(logits)))
    return (m * exp(c) + 1.0) / 2.0


def test_uniqueness_is_fiftyone_brains(embeddings):
    """Equal (1e-6) and Spearman 1.0 to `_compute_uniqueness` over its sklearn index (centred, unit-length, Euclidean;
    NearestNeighbors, K = 3, weights 0.6/0.3/0.1, divided by the max) on 120 clustered embeddings (an exact pair left
    out: which zero is "itself" is arbitrary); the far ones rank high; 3 or fewer images all 1.
    """
    ours, theirs = scores.uniqueness(embeddings), fiftyone_uniqueness(embeddings)
    keep = np.ones(len(ours), bool)
    keep[[10, 11]] = False  # an exact pair: which of the two zero distances sklearn calls "itself" is arbitrary
    np.testing.assert_allclose(ours[keep], theirs[keep], atol=1e-6)
    assert scipy_stats.spearmanr(ours[keep], theirs[keep]).statistic == pytest.approx(1.0)
    assert ours.max() == 1.0 and ours[:4].mean() > np.median(ours)  # the far ones are the most unique
    assert scores.uniqueness(embeddings[:3]).tolist() == [1.0, 1.0, 1.0]  # K or fewer images: all 1 (:165)


def test_representativeness_is_fiftyone_brains(embeddings):
    """Equal (1e-6) and Spearman 1.0 to `_cluster_ranker` (KMeans 20, random_state 1234, per-cluster normalised
    distance); a one-member cluster is 0 here (NaN there).
    """
    ours = scores.representativeness(embeddings)
    with np.errstate(invalid="ignore"):  # theirs divides a cluster of identical members by 0: NaN there, 0 here
        theirs = fiftyone_representativeness(embeddings)
    alone = np.isnan(theirs)
    assert (ours[alone] == 0).all() and (~alone).sum() > 100
    np.testing.assert_allclose(ours[~alone], theirs[~alone], atol=1e-6)
    assert scipy_stats.spearmanr(ours[~alone], theirs[~alone]).statistic == pytest.approx(1.0)


def test_hardness_and_mistakenness_are_fiftyone_brains():
    """Hardness = scipy's entropy of softmax(logits) (1e-9); mistakenness = `_compute_mistakenness_class` per image
    (1e-9), NaN without a given label, every mistake ≥ 0.5 ≥ every agreement.
    """
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, (40, 5))
    labels = ("a", "b", "c", "d", "e")
    predicted = [labels[i] for i in logits.argmax(1)]
    given = [labels[i] if k % 3 else predicted[k] for k, i in enumerate(rng.integers(0, 5, 40))]
    given[7] = None  # outside a class folder: no mistakenness
    reference = [scipy_stats.entropy(scipy_special.softmax(row)) for row in logits]
    np.testing.assert_allclose(scores.entropy(logits), reference, atol=1e-9)
    ours = scores.mistakenness(logits, predicted, given)
    theirs = [fiftyone_mistakenness(row, float(p == g)) for row, p, g in zip(logits, predicted, given)]
    assert np.isnan(ours[7])
    keep = np.arange(40) != 7
    np.testing.assert_allclose(ours[keep], np.asarray(theirs)[keep], atol=1e-9)
    wrong = np.asarray([p != g for p, g in zip(predicted, given)]) & keep
    assert wrong.any() and (~wrong & keep).any()
    assert ours[wrong].min() >= 0.5 >= ours[~wrong & keep].max()  # a mistake always ranks above an agreement


def test_a_cancel_stops_the_scores_between_blocks(embeddings, monkeypatch):
    """Uniqueness in blocks of 16 rows equals it in one block; a token cancelled during the second block of the
    nearest-neighbour search (blocks of 16 of 120 embeddings) stops `uniqueness` with `Cancelled` before the third
    block's search: the Folder tab's scores job, discarded (another folder, a closed window), does not run on to the
    k-means.
    """
    from vitstudio.core.jobs import Cancelled, CancelToken

    whole = scores.uniqueness(embeddings)  # 120 embeddings: one block
    monkeypatch.setattr(scores, "BLOCK_BYTES", 1)  # the smallest block, 16 rows: 8 blocks, the same scores
    np.testing.assert_array_equal(scores.uniqueness(embeddings), whole)
    token, seen = CancelToken(), []
    real = scores.torch.Tensor.topk

    def counted(self, *args, **kwargs):  # the second block's search cancels: the third never starts
        seen.append(len(self))
        if len(seen) == 2:
            token.cancel()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(scores.torch.Tensor, "topk", counted)
    with pytest.raises(Cancelled):
        scores.uniqueness(embeddings, token)
    assert seen == [16, 16]  # stopped before the third block's search


def _embedded(given_names, labels=("0", "1", "2")):
    """A stand-in for FolderEmbeddings: 12 images, confident logits over `labels`."""
    from types import SimpleNamespace

    rng = np.random.default_rng(2)
    logits = rng.normal(0, 4, (12, len(labels))).astype(np.float32)
    return SimpleNamespace(paths=tuple(f"/f/{g}/{i}.png" for i, g in enumerate(given_names)), rows=np.arange(12),
                           features_of=lambda: rng.normal(0, 1, (12, 8)).astype(np.float32), logits=logits,
                           labels=labels, errors=())


def test_folders_the_model_cannot_know_have_no_mistakenness():
    """Folders named for classes the model does not have (ant photos through a digits model) get no mistakenness
    (NaN), not a score of 0.5 or more for every image, and the result names those folders; images in folders the
    model knows keep fiftyone-brain's score."""
    given = ["ants"] * 6 + ["bees"] * 6
    out = scores.brain_scores(_embedded(given), given)
    assert np.isnan(out.mistakenness).all() and np.isfinite(out.hardness).all()
    assert out.unknown == ("ants", "bees")
    assert "ants, bees are not among the model's classes (0, 1, 2)" in out.mistakenness_note
    assert set(out.mistakenness_notes()) == {out.mistakenness_note}
    assert [r["mistakenness"] for r in out.rows()] == [None] * 12

    mixed = ["0"] * 4 + ["1"] * 4 + ["other"] * 4  # one unknown folder: only its images lose the score
    out = scores.brain_scores(_embedded(mixed), mixed)
    assert np.isnan(out.mistakenness[8:]).all() and np.isfinite(out.mistakenness[:8]).all()
    assert out.unknown == ("other",) and "class folder other is not among" in out.mistakenness_note
    known = scores.brain_scores(_embedded(["0", "1", "2"] * 4), ["0", "1", "2"] * 4)
    assert known.unknown == () and known.mistakenness_note == "" and np.isfinite(known.mistakenness).all()


def test_scores_command_says_why_mistakenness_is_empty(tmp_path, capsys):
    """`vitstudio scores` on folders the model has no class for: an empty CSV cell and null in --json (with the
    reason beside it), and the reason printed once as a note; the other scores are there."""
    import csv
    import json

    from vitstudio.cli import main
    from vitstudio.core.models.demo import bundled_demo, render_digits

    data = render_digits(tmp_path / "photos", 2)
    for digit, name in (("0", "ants"), ("1", "bees")):
        (data / digit).rename(data / name)
    model = ["--model", str(bundled_demo()), "--quiet", "--device", "cpu", "--precision", "fp32"]
    capsys.readouterr()
    assert main(["scores", str(data), *model, "--json"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 20 and all(r["hardness"] is not None for r in rows)
    odd = [r for r in rows if r["given"] in ("ants", "bees")]
    assert len(odd) == 4 and all(r["mistakenness"] is None for r in odd)
    assert all("ants, bees are not among the model's classes" in r["mistakenness_note"] for r in odd)
    digits = [r for r in rows if r["given"] not in ("ants", "bees")]
    assert all(r["mistakenness"] is not None and "mistakenness_note" not in r for r in digits)
    assert err.count("note: class folders ants, bees are not among the model's classes") == 1

    assert main(["scores", str(data), *model, "--csv", str(tmp_path / "s.csv")]) == 0
    with open(tmp_path / "s.csv", encoding="utf-8-sig", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert {r["mistakenness"] for r in table if r["given"] in ("ants", "bees")} == {""}
    assert all(float(r["mistakenness"]) >= 0 for r in table if r["given"] not in ("ants", "bees"))
    assert "mistakenness_note" not in table[0]
