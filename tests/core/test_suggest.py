"""`suggest` (issue 22 item 4): k-center greedy against a brute-force reference, coverage when nothing is labelled,
the least sure images (between the classes) when two classes are labelled, and the CLI on a folder + labels file."""

from __future__ import annotations

import json

import numpy as np

from tests.conftest import TINY_SPEC, imported_on_use
from tests.core.synthetic_data import make_dataset, tree_state
from vitstudio.core.train.suggest import _normalised, k_center_greedy, suggest

scipy_distance = imported_on_use("scipy.spatial.distance")  # the reference, imported where the tests run


def test_k_center_greedy_picks_the_farthest_point_each_time():
    """Each pick is the farthest candidate from the chosen set, with its distance; reference: scipy cdist max-min rule
    written in the test.
    """
    rng = np.random.default_rng(0)
    x = _normalised(rng.normal(size=(200, 8)))
    centres, candidates = np.arange(5), np.arange(5, 200)
    picks = k_center_greedy(x, candidates, centres, 6)
    chosen = list(centres)
    for index, distance in picks:  # reference: scipy's distances, the max-min rule written out
        nearest = scipy_distance.cdist(x[candidates], x[chosen]).min(1)
        nearest[np.isin(candidates, chosen)] = -1
        assert index == candidates[np.argmax(nearest)]
        assert distance == np.float32(nearest.max()) or abs(distance - nearest.max()) < 1e-5
        chosen.append(index)


def test_nothing_labelled_covers_the_space():
    """With no labels, 3 picks (no margin) come one from each of 3 blobs."""
    rng = np.random.default_rng(1)
    blobs = np.concatenate([rng.normal(loc=c, scale=0.05, size=(50, 3)) for c in np.eye(3) * 4])
    picks = suggest(blobs, np.full(150, -1), 3)
    assert all(p.margin is None for p in picks)
    assert sorted(p.index // 50 for p in picks) == [0, 1, 2]  # one from each blob


def test_two_labelled_classes_ask_about_the_border():
    """With two labelled ends of an arc, 5 distinct unlabelled picks with margins lie in the uncertain middle."""
    rng = np.random.default_rng(2)
    t = rng.uniform(0, 1, 300)  # points on an arc from class 0's end (t=0) to class 1's (t=1)
    x = np.stack([np.cos(t * np.pi / 2), np.sin(t * np.pi / 2), 0.01 * rng.normal(size=300)], 1)
    labels = np.full(300, -1)
    labels[np.argsort(t)[:10]] = 0
    labels[np.argsort(t)[-10:]] = 1
    picks = suggest(x, labels, 5)
    assert all(p.margin is not None and labels[p.index] == -1 for p in picks)
    assert all(0.25 < t[p.index] < 0.75 for p in picks), [t[p.index] for p in picks]  # the uncertain middle
    assert len({p.index for p in picks}) == 5


def test_cli_suggests_unlabelled_images_and_writes_nothing(tmp_path, capsys):
    """`suggest --labels --json` gives 4 unlabelled "uncertain" suggestions with predicted classes; without labels
    prints 2 and says "cover the folder"; dataset untouched.
    """
    from vitstudio.cli import main

    data = make_dataset(tmp_path / "data", per_class=8)
    files = sorted(data.rglob("*.png"))
    labels = tmp_path / "labels.csv"
    labels.write_text("\n".join(f"{p},{p.parent.name if n % 2 else ''}" for n, p in enumerate(files)))
    before = tree_state(data)
    assert main(["suggest", str(data), "--model", TINY_SPEC, "--labels", str(labels), "--n", "4", "--json",
                 "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    unlabelled = {str(p) for n, p in enumerate(files) if n % 2 == 0}
    assert doc["labelled"] == len(files) - len(unlabelled) and doc["classes"] == ["blue", "green", "red"]
    assert len(doc["suggestions"]) == 4 and {s["path"] for s in doc["suggestions"]} <= unlabelled
    assert all(s["reason"] == "uncertain" and s["predicted"] in doc["classes"] for s in doc["suggestions"])
    assert main(["suggest", str(data), "--model", TINY_SPEC, "--n", "2", "--quiet"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 2 and "cover the folder" in out.err
    assert tree_state(data) == before
