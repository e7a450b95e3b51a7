"""Folder work reuses what it computed (issue 50 item 1): `predict FOLDER` reads the embedding cache (no forward for
a file seen before, the same records as classifying it), `audit` and `layers` read back their result while nothing
changed and recompute when a file does, and a folder pass's batch follows the model's size."""

from __future__ import annotations

import csv
import errno

import numpy as np
import pytest
from PIL import Image

from vitstudio.cli import main
from vitstudio.core.folder import audit as audit_module
from vitstudio.core.folder import embedcache, scores
from vitstudio.core.inference import classify_files, folder_batch_size
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.core.train import layer_probes


@pytest.fixture(scope="module")
def small_digits(tmp_path_factory):
    return render_digits(tmp_path_factory.mktemp("digits") / "data", per_class=4)


def _refuse(*_args, **_kwargs):
    raise AssertionError("recomputed although nothing changed")


def test_predict_folder_reads_the_cache_and_equals_classifying(small_digits, demo, tmp_path, monkeypatch):
    """`predict FOLDER --csv` twice: the second run never calls the model (pooled_features patched to fail) and writes
    the same CSV; rows equal `classify_files` (order, top-1 label, probability 2e-6, OOD score 2e-5); a cache folder it
    may not write: predicted without the cache, the same labels.
    """
    demo_model = str(bundled_demo())
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    assert main(["predict", str(small_digits), "--model", demo_model, "--csv", str(first), "--quiet"]) == 0
    monkeypatch.setattr(embedcache, "pooled_features", _refuse)  # a second run may not run the model
    assert main(["predict", str(small_digits), "--model", demo_model, "--csv", str(second), "--quiet"]) == 0
    rows = list(csv.DictReader(first.open()))
    assert rows == list(csv.DictReader(second.open())) and len(rows) == 40
    expected = [p for batch in classify_files(demo, [small_digits], topk=5, batch_size=7) for p in batch]
    assert [r["path"] for r in rows] == [p.path for p in expected]
    assert [r["label_1"] for r in rows] == [p.labels[0] for p in expected]
    np.testing.assert_allclose([float(r["prob_1"]) for r in rows], [p.probs[0] for p in expected], atol=2e-6)
    np.testing.assert_allclose([float(r["ood_score"]) for r in rows], [p.ood_score for p in expected], atol=2e-5)

    def unwritable(*_args, **_kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", "cache")

    monkeypatch.setattr(embedcache.EmbeddingCache, "__init__", unwritable)  # a cache folder it may not write
    third = tmp_path / "third.csv"
    assert main(["predict", str(small_digits), "--model", demo_model, "--csv", str(third), "--quiet"]) == 0
    assert [r["label_1"] for r in csv.DictReader(third.open())] == [r["label_1"] for r in rows]  # without the cache


def _run(gen):
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def test_audit_layers_and_scores_read_back_their_result_until_a_file_changes(small_digits, demo, monkeypatch):
    """A second audit, layers and scores run read their result back (review, grouping, probes and scores patched to
    fail; equal report, accuracies and scores); one image rewritten: the scores and the review run once and the probes
    once again (every block in one fit).
    """
    report = _run(audit_module.audit(small_digits, demo))
    probes = _run(layer_probes.probe_layers(demo, small_digits, folds=2))
    scored = _run(scores.score_folder(demo, [str(small_digits)]))
    with monkeypatch.context() as patched:
        patched.setattr(audit_module, "review_labels", _refuse)
        patched.setattr(audit_module, "find_groups", _refuse)
        patched.setattr(layer_probes, "fold_accuracies", _refuse)
        patched.setattr(scores, "brain_scores", _refuse)
        assert _run(audit_module.audit(small_digits, demo)).to_json() == report.to_json()
        again = _run(layer_probes.probe_layers(demo, small_digits, folds=2))
        np.testing.assert_array_equal(again.accuracy, probes.accuracy)
        assert _run(scores.score_folder(demo, [str(small_digits)])).rows() == scored.rows()
    changed = next((small_digits / "3").iterdir())
    Image.new("L", (32, 32), 255).save(changed)  # a blank page where a 3 was
    calls = []
    monkeypatch.setattr(scores, "brain_scores", lambda *a: calls.append("scores") or scored)
    monkeypatch.setattr(audit_module, "review_labels", lambda *a: calls.append("review") or [])
    monkeypatch.setattr(layer_probes, "fold_accuracies", lambda *a: _probed(calls, len(demo.model.blocks)))
    _run(audit_module.audit(small_digits, demo))
    _run(layer_probes.probe_layers(demo, small_digits, folds=2))
    _run(scores.score_folder(demo, [str(small_digits)]))
    assert calls.count("scores") == calls.count("review") == calls.count("probe") == 1  # every block in one fit


def test_an_audit_decodes_every_image_once_and_keeps_the_fingerprints_a_separate_pass_computes(small_digits, demo,
                                                                                                monkeypatch):
    """An audit with a model on a cold cache reads each of the 40 images exactly once (the embedding pass's and the
    fingerprints' readers counted together); the fingerprints it kept are then read without a decode and equal
    `fingerprints()` on its own decode (index, hash bits, mirrored bits, thumbnails).
    """
    from vitstudio.core.data import preprocess
    from vitstudio.core.folder import fingerprintcache
    from vitstudio.core.folder import fingerprints as fingerprints_module

    decoded = []
    read = preprocess.read_image

    def counted(path):
        decoded.append(str(path))
        return read(path)

    monkeypatch.setattr(preprocess, "read_image", counted)  # the embedding pass's decode
    monkeypatch.setattr(fingerprints_module, "read_image", counted)  # the fingerprints' own (a file not ridden)
    report = _run(audit_module.audit(small_digits, demo))
    paths = sorted(str(p) for p in small_digits.rglob("*.png"))
    assert sorted(decoded) == paths and report.images == 40  # each image once, every one of them
    decoded.clear()
    kept = fingerprintcache.cached_fingerprints(paths)
    assert decoded == []  # all from the cache the embedding pass filled
    monkeypatch.setattr(fingerprints_module, "read_image", read)
    separate = fingerprints_module.fingerprints(paths)  # the model-free pass on its own decode
    for field in ("index", "bits", "mirror_bits", "thumbs", "mirror_thumbs"):
        np.testing.assert_array_equal(getattr(kept, field), getattr(separate, field))


def test_the_label_review_reads_its_report_back_until_a_given_label_changes(small_digits, demo, monkeypatch):
    """The Folder tab's review job (`folder_jobs.review_job`) with a label given apart (a 3 given as 8): a second review
    with the same labels reads the kept report (review and grouping patched to fail; equal JSON); the same image given 5
    instead is reviewed again, with 5 as its given label.
    """
    from vitstudio.app.folder_jobs import review_job  # the Folder tab's review (its Labels tab's labels given apart)

    three = sorted(str(p) for p in (small_digits / "3").glob("*.png"))[-1]
    first = _run(review_job(None, str(small_digits), demo, None, {three: "8"}))
    assert any(i.path == three and i.given == "8" for i in first.label_issues)
    with monkeypatch.context() as patched:
        patched.setattr(audit_module, "review_labels", _refuse)
        patched.setattr(audit_module, "find_groups", _refuse)
        assert _run(review_job(None, str(small_digits), demo, None, {three: "8"})).to_json() == first.to_json()
    given = []
    monkeypatch.setattr(audit_module, "review_labels", lambda paths, f, labels, classes: given.append(
        classes[labels[list(paths).index(three)]]) or [])
    _run(review_job(None, str(small_digits), demo, None, {three: "5"}))  # another label given: reviewed again
    assert given == ["5"]


def _probed(calls: list, blocks: int):
    calls.append("probe")
    return np.ones((blocks, 2))
    yield  # a generator, as fold_accuracies


def test_a_folder_pass_batches_as_many_images_as_the_model_allows(demo):
    """`folder_batch_size`: 256 for the demo (65 tokens of width 64), the asked size when given, 62 for ViT-B's 197
    tokens of width 768 and 12 heads (512 MB of one block's activations).
    """
    from vitstudio.core.models.loading import load_model

    assert folder_batch_size(demo) == 256  # 65 tokens of width 64: far under the budget
    assert folder_batch_size(demo, 7) == 7  # asked for: as asked
    big = load_model("custom:img=224,patch=16,width=768,depth=1,heads=12,classes=3")  # ViT-B's tokens and width
    per_image = 4 * 197 * (8 * 768 + 2 * 12 * 197)
    assert folder_batch_size(big) == (512 << 20) // per_image == 62
