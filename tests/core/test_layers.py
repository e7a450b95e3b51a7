"""Layer by layer (issue 33, items 2-3): probes per block over a folder, and CKA between the blocks of two models.

References: CKA from Kornblith et al.'s formula written here with n × n Gram matrices and the centring matrix
(float64), and torch-cka (a published minibatch CKA) on the same features; the probes against the quick preset's
accuracy on the same digits."""

from __future__ import annotations

import copy
import json
from unittest.mock import patch

import numpy as np
import pytest
import torch

from tests.core.generators import drain
from vitstudio.core.analysis.cka import linear_cka, linear_cka_matrix, minibatch_cka_matrix
from vitstudio.core.folder.layer_cache import embed_layers
from vitstudio.core.folder.layer_compare import compare_layers
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.core.models.loading import load_model, loaded_module
from vitstudio.core.train.layer_probes import probe_layers


def kornblith_cka(x: np.ndarray, y: np.ndarray) -> float:
    """HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L)) with HSIC = tr(K H L H) / (n - 1)², K = XXᵀ, L = YYᵀ (Eq. 3 of
    Kornblith et al. 2019, biased estimator)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    n = len(x)
    h = np.eye(n) - np.ones((n, n)) / n

    def hsic(k, g):
        return np.trace(k @ h @ g @ h) / (n - 1) ** 2

    k, g = x @ x.T, y @ y.T
    return hsic(k, g) / np.sqrt(hsic(k, k) * hsic(g, g))


def test_linear_cka_equals_kornblith_formula_and_is_invariant_as_published():
    """Linear CKA equals Kornblith et al.'s Gram/centring-matrix formula (float64, 1e-6), is 1 under an orthogonal
    transform, isotropic scale and offset, and the matrix form agrees; reference: Kornblith et al. 2019 Eq. 3 written in
    the test.
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 12))
    y = x @ rng.normal(size=(12, 7)) + 0.5 * rng.normal(size=(40, 7))
    assert abs(linear_cka(x, y) - kornblith_cka(x, y)) < 1e-6
    q, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    assert abs(linear_cka(x, 3.0 * x @ q + 2.0) - 1.0) < 1e-9  # orthogonal transform, isotropic scale, offset
    matrix = linear_cka_matrix([x, y], [y, x])
    np.testing.assert_allclose(matrix, [[kornblith_cka(x, y), 1.0], [1.0, kornblith_cka(y, x)]], atol=1e-6)


def _stack_model(width_list):
    """Identity layers over precomputed features, so torch-cka's hooks see exactly our features."""
    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Identity() for _ in width_list)

        def forward(self, x):
            return [layer(part) for layer, part in zip(self.layers, x.split(width_list, 1))]

    return Stack()


def test_minibatch_cka_equals_torch_cka_on_the_same_features():
    """Minibatch CKA (batches of 16) equals torch-cka's CKA.compare on the same features through identity layers (1e-9,
    float64); reference: torch-cka 0.21.
    """
    from torch.utils.data import DataLoader, TensorDataset
    from torch_cka import CKA

    rng = np.random.default_rng(1)
    a = [rng.normal(size=(48, 6)), rng.normal(size=(48, 5))]
    b = [a[0] @ rng.normal(size=(6, 4)) + 0.3 * rng.normal(size=(48, 4)), rng.normal(size=(48, 3))]
    ours = minibatch_cka_matrix(a, b, batch=16)
    loader_a = DataLoader(TensorDataset(torch.tensor(np.concatenate(a, 1))), batch_size=16)
    loader_b = DataLoader(TensorDataset(torch.tensor(np.concatenate(b, 1))), batch_size=16)
    ref = CKA(_stack_model([6, 5]).double(), _stack_model([4, 3]).double(), "a", "b",
              model1_layers=["layers.0", "layers.1"], model2_layers=["layers.0", "layers.1"])
    torch.set_default_dtype(torch.float64)  # torch-cka builds its ones() in the default dtype
    try:
        ref.compare(loader_a, loader_b)
    finally:
        torch.set_default_dtype(torch.float32)
    np.testing.assert_allclose(ours, ref.export()["CKA"].numpy(), atol=1e-9)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return render_digits(tmp_path_factory.mktemp("digits"), per_class=100)  # 1,000 of the 1,797: half the time


@pytest.fixture(scope="module")
def demo():
    return load_model(str(bundled_demo()))


def test_a_model_against_itself_is_one_on_the_diagonal_and_a_redrawn_last_block_drops_only_there(demo, digits):
    """The demo model against itself: diagonal 1 (1e-6); against a copy with its last block re-drawn: diagonal 1 except
    the last block (< 0.9); the comparison fills the layer cache (a second read computes 0) and a cell equals linear_cka
    of the cached blocks.
    """
    paths = sorted(str(p) for p in digits.glob("[0-4]/*.png"))[::4]
    same = drain(compare_layers(demo, demo, paths))
    np.testing.assert_allclose(np.diag(same.matrix), 1.0, atol=1e-6)
    model = copy.deepcopy(demo.model)
    torch.manual_seed(5)
    for p in model.blocks[-1].parameters():  # the last block re-drawn
        torch.nn.init.normal_(p, std=0.05)
    redrawn = loaded_module(model, "redrawn")
    result = drain(compare_layers(demo, redrawn, paths))
    diagonal = np.diag(result.matrix)
    np.testing.assert_allclose(diagonal[:-1], 1.0, atol=1e-6)
    assert diagonal[-1] < 0.9, diagonal
    assert result.images == len(paths) and result.matrix.shape == (4, 4)
    # the same pairs from the cached features and from features computed here agree (one forward per batch)
    layers = drain(embed_layers(demo, paths))
    assert layers.computed == 0  # every image came from the cache the comparison filled
    assert abs(result.matrix[0, 0] - linear_cka(layers.block(0), drain(embed_layers(redrawn, paths)).block(0))) < 1e-9


def test_probes_rise_with_depth_and_end_within_a_point_of_the_quick_preset(demo, digits, tmp_path):
    """On 1,000 of the digits (100 a class) with the demo model the 5-fold probe accuracy rises at every block, the
    lens's accuracy rises, and the last block is within 1 point of the quick preset's validation accuracy on the same
    folder; reference: the quick preset. [fine-tune]
    """
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    probes = drain(probe_layers(demo, digits))
    assert probes.images == 1000 and probes.folds == 5
    assert np.all(np.diff(probes.accuracy) > 0), probes.accuracy  # readable later, better
    assert probes.lens_accuracy is not None and probes.lens_accuracy[-1] > probes.lens_accuracy[0]
    result = drain(fine_tune(make_config(str(digits), str(bundled_demo()), str(tmp_path / "quick"), "quick")))
    quick = json.loads((tmp_path / "quick" / "status.json").read_text())["best_val_acc"]
    assert result is not None
    assert abs(probes.accuracy[-1] - quick) <= 0.01, (probes.accuracy[-1], quick)


def test_the_cli_prints_the_probes_and_the_matrix_the_core_computes(demo, digits, capsys):
    """`vitstudio layers --json` prints the core's probe accuracies and the feature note, and `--labels CSV` of the same
    images the same figures; `compare-layers --minibatch 10 --json` the core's matrix (1e-6); one --model is refused
    (exit 2, "give --model twice"); a class of one image is refused in one line naming it.
    """
    from vitstudio.cli import main

    subset = digits.parent / "subset"
    for c in ("3", "8"):
        (subset / c).mkdir(parents=True, exist_ok=True)
        for p in sorted((digits / c).glob("*.png"))[:20]:
            (subset / c / p.name).write_bytes(p.read_bytes())
    core = drain(probe_layers(demo, subset, folds=3))
    assert main(["layers", str(subset), "--model", str(bundled_demo()), "--folds", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [b["probe_accuracy"] for b in doc["blocks"]] == [round(float(a), 6) for a in core.accuracy]
    assert "prefix token" in doc["features"]
    labels = subset / "labels.csv"  # the same images as a labels file (--labels): the same figures
    labels.write_text("path,label\n" + "".join(f"{p.relative_to(subset)},{p.parent.name}\n"
                                                for p in sorted(subset.glob("*/*.png"))))
    assert main(["layers", "--labels", str(labels), "--model", str(bundled_demo()), "--folds", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["blocks"] == doc["blocks"]
    matrix = drain(compare_layers(demo, demo, [str(subset)], minibatch=10)).matrix
    assert main(["compare-layers", str(subset), "--model", str(bundled_demo()), "--model", str(bundled_demo()),
                 "--minibatch", "10", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(doc["cka"], matrix, atol=1e-6)
    assert doc["estimator"].startswith("minibatch")
    assert main(["compare-layers", str(subset), "--model", str(bundled_demo())]) == 2
    assert "give --model twice" in capsys.readouterr().err
    lone = subset.parent / "lone"  # a class of one image cannot be split into folds: one line, exit 2
    for c, n in (("3", 4), ("8", 1)):
        (lone / c).mkdir(parents=True, exist_ok=True)
        for p in sorted((digits / c).glob("*.png"))[:n]:
            (lone / c / p.name).write_bytes(p.read_bytes())
    assert main(["layers", str(lone), "--model", str(bundled_demo())]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: Every class needs at least two readable images for the probes' folds; 8 has one."


def test_the_stacked_probes_equal_a_sklearn_logistic_regression_per_set_and_fold():
    """Every set × fold fitted as one problem reaches each probe's own optimum: the held-out accuracy of
    scikit-learn's LogisticRegression on the same training split, standardised, C = 1 / (l2 · n). So does the
    objective summed over slices of 50 images (how a big folder's logits are bounded), and with one set per group.

    Every set × fold's probe fitted as one L-BFGS-B problem (`stacked_probes.fold_accuracies`: 3 sets of features six
    decades apart in scale, 4 folds, l2 0.05) has the held-out accuracy of scikit-learn's LogisticRegression on the same
    split standardised, C = 1/(l2·n), within one image per fold; so does the objective summed over slices of 50 images,
    and with one set per group; reference: scikit-learn.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from vitstudio.core.train.layer_probes import fold_ids
    from vitstudio.core.train.stacked_probes import fold_accuracies

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, 240)
    scales = 10.0 ** np.arange(-2, 4)  # features six decades apart: the standardisation decides the penalty
    sets = [(rng.normal(size=(3, 6))[labels] + rng.normal(size=(240, 6)) * noise) * scales + 50.0
            for noise in (0.8, 1.5, 3.0)]
    folds = fold_ids(labels, 4)
    l2 = 0.05  # strong: the optimum depends on the penalty, not only on the data's separation
    ours = drain(fold_accuracies(sets, labels, folds, 3, l2=l2))
    sliced = drain(fold_accuracies(sets, labels, folds, 3, l2=l2, rows=50))
    with patch("vitstudio.core.train.stacked_probes.STACK_BYTES", 1):
        single = drain(fold_accuracies(sets, labels, folds, 3, l2=l2, rows=50))
    reference = np.zeros((3, 4))
    for s, x in enumerate(sets):
        for k in range(4):
            train = folds != k
            scaler = StandardScaler().fit(x[train])
            fit = LogisticRegression(C=1 / (l2 * train.sum()), tol=1e-8, max_iter=1000)
            fit.fit(scaler.transform(x[train]), labels[train])
            reference[s, k] = (fit.predict(scaler.transform(x[~train])) == labels[~train]).mean()
    held = np.bincount(folds)
    for fitted in (ours, sliced, single):
        assert np.all(np.abs(fitted - reference) * held <= 1), (fitted, reference)  # at most one image on a tie
    assert reference.min() < 0.9 and reference.std() > 0.02  # neither trivially separable nor all alike
