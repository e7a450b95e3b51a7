"""Duplicate groups are copies: exact = identical bytes, near = cliques on which two signals agree, with thresholds
calibrated on the folder; checked against imagehash / imagededup on the same images, on planted folders of real
photos and of digits; the audit report is strict JSON, lists what it used, and the CLI exits 1 on unreadable files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from tests.core.generators import drain as run
from tests.core.planted import distinct_photos, planted_digits, planted_photos
from vitstudio.core.folder import duplicates as D
from vitstudio.core.folder.audit import audit
from vitstudio.core.folder.fingerprints import fingerprint, fingerprints
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.models.loading import load_model


@pytest.fixture(scope="module")
def demo():
    return load_model(str(bundled_demo()))


def _found(groups) -> list[set[str]]:
    """Each group with the exact copies it stands for."""
    return [set(g.paths) | {c for v in g.copies.values() for c in v} for g in groups]


def _refuse(name):
    raise ValueError(f"not strict JSON: {name}")


# -- the signals against their reference implementations -----------------------------------------------------------
def test_perceptual_hash_is_imagehash_bit_for_bit_mirror_included():
    """Our pHash and mirrored pHash equal imagehash's bit for bit; thumbnails correlate 1 with a 16×16 grey reduction;
    reference: imagehash.
    """
    import imagehash

    for name, a in list(distinct_photos().items())[::4]:
        img = Image.fromarray(a)
        bits, mirror, thumb, mthumb = fingerprint(img)
        np.testing.assert_array_equal(bits, imagehash.phash(img).hash.reshape(-1), err_msg=name)
        np.testing.assert_array_equal(mirror, imagehash.phash(ImageOps.mirror(img)).hash.reshape(-1), err_msg=name)
        grey = np.asarray(img.convert("L").resize((32, 32), Image.LANCZOS), np.float64)
        small = grey.reshape(16, 2, 16, 2).mean((1, 3))
        assert np.corrcoef(small.ravel(), thumb.astype(np.float64))[0, 1] == pytest.approx(1, abs=1e-5)
        assert np.corrcoef(small[:, ::-1].ravel(), mthumb.astype(np.float64))[0, 1] == pytest.approx(1, abs=1e-5)


def test_hamming_pairs_equal_brute_force():
    """`hamming_pairs` (mirror included) equals a brute-force pairwise Hamming computation in the test."""
    rng = np.random.default_rng(0)
    bits = rng.random((300, 64)) < 0.5
    bits[1] = bits[0] ^ (np.arange(64) < 3)  # 3 bits apart
    mirror = rng.random((300, 64)) < 0.5
    mirror[7] = bits[9]  # 7 mirrored is 9
    got = D.hamming_pairs(bits, mirror, 5)
    direct = (bits[:, None] != bits[None]).sum(-1)
    flipped = np.minimum((bits[:, None] != mirror[None]).sum(-1), (mirror[:, None] != bits[None]).sum(-1))
    i, j = np.triu_indices(300, 1)
    want = {(a, b) for a, b in zip(i, j) if min(direct[a, b], flipped[a, b]) <= 5}
    assert set(zip(got[0].tolist(), got[1].tolist())) == want and {(0, 1), (7, 9)} <= want


def test_cliques_never_chain():
    """Groups are cliques: a chain 0-1-2-3-4 is never one group; the triangle is."""
    # a path 0-1-2-3-4 and a triangle 5-6-7: no group holds two images that are not linked themselves
    i, j = np.array([0, 1, 2, 3, 5, 5, 6]), np.array([1, 2, 3, 4, 6, 7, 7])
    groups = D._cliques(8, i, j, np.ones(len(i)))
    linked = set(zip(i.tolist(), j.tolist()))
    assert sorted(map(sorted, groups))[-1] == [5, 6, 7]
    for g in groups:
        assert all((min(a, b), max(a, b)) in linked for a in g for b in g if a != b)
    assert max(len(g) for g in groups if 5 not in g) == 2


def test_calibration_is_relative_to_the_folder():
    """Cosine cut from the folder's median nearest neighbour (or fixed when few images); the hash cut is lowered when
    distinct images are close in bits; explanation strings.
    """
    cut, why = D.calibrate(np.full(100, 0.99), "feature cosine", 0.5)
    assert cut == pytest.approx(0.999) and "0.9900" in why and "10× closer" in why
    cut, why = D.calibrate(np.full(3, 0.99), "x", 0.5)
    assert cut == 0.5 and why.startswith("fixed")
    assert D.hash_cut(10, np.full(50, 22.0)) == (10, "--hash-distance 10; the median nearest-neighbour distance "
                                                     "of this folder is 22")
    cut, why = D.hash_cut(10, np.full(50, 7.0))  # distinct images 7 bits apart: the hash alone tells little
    assert cut == 3 and "lowered" in why


# -- planted folders --------------------------------------------------------------------------------------------
def test_exact_groups_hold_identical_bytes_only(tmp_path, photos):
    """Only byte-identical files are an exact group; a q90 re-encode joins the near group with hash distance ≤ 2 and
    pixel similarity > 0.999.
    """
    data = tmp_path / "data"
    (data / "a").mkdir(parents=True)
    img = Image.open(photos["coffee"]).convert("RGB")
    img.save(data / "a" / "coffee.png")
    shutil.copy(data / "a" / "coffee.png", data / "a" / "coffee-copy.png")
    img.save(data / "a" / "coffee-q90.jpg", quality=90)  # the same picture, other bytes: near, not exact
    Image.open(photos["rocket"]).convert("RGB").save(data / "a" / "rocket.png")
    paths = sorted(str(p) for p in data.rglob("*.*"))
    groups, thresholds, _ = D.find_groups(paths)
    exact = [g for g in groups if g.exact]
    assert [set(g.paths) for g in exact] == [{str(data / "a" / "coffee.png"), str(data / "a" / "coffee-copy.png")}]
    near = [g for g in groups if not g.exact]
    assert _found(near) == [{str(data / "a" / n) for n in ("coffee.png", "coffee-copy.png", "coffee-q90.jpg")}]
    assert near[0].members[1].hash_distance <= 2 and near[0].members[1].pixels > 0.999
    assert thresholds.hash_distance == D.HASH_DISTANCE and thresholds.cosine is None


def test_digits_with_the_bundled_model_give_exactly_the_planted_groups(demo, tmp_path):
    """The issue's criterion: distinct digits, planted exact / JPEG / resized copies and flipped labels, default
    settings: every planted group and nothing else (perceptual hashes of distinct digits differ by as little as 2 bits,
    the model's features put a whole class within cosine 0.99: neither alone decides)."""
    data, planted, flipped = planted_digits(tmp_path / "data")
    report = run(audit(data, demo))
    assert sorted(map(sorted, _found(report.groups))) == sorted(map(sorted, planted))
    assert report.thresholds.cosine > 0.999 and report.thresholds.packed
    assert report.thresholds.hash_distance < D.HASH_DISTANCE and "lowered" in report.thresholds.hash_why
    assert any("puts distinct images of this folder close" in n for n in report.notes)
    # the old rule (any hash pair ≤ 6 bits, chained) on the same folder: distinct digits grouped
    paths = [str(p) for p in sorted(data.rglob("*.*"))]
    old = D.hamming_pairs(*(lambda f: (f.bits, f.bits))(fingerprints(paths)), 6)
    assert len(old[0]) > len(planted)


def test_photos_recall_at_least_imagededups_and_no_false_pair(demo, tmp_path):
    """Real photos with 30 planted copies (exact, JPEG q60, 80 %, 5 % crop, +15 % brightness, mirrored), through the
    digits model (which packs photos close): no false pair, and at least imagededup's PHash recall at its default."""
    phash_mod = pytest.importorskip("imagededup.methods")
    data, planted, kinds = planted_photos(tmp_path / "data")
    report = run(audit(data, demo))
    found = _found(report.groups)
    pairs = {frozenset((a, b)) for g in found for a in g for b in g if a < b}
    truth = {frozenset(g) for g in planted}
    assert pairs <= truth, pairs - truth  # no false pair
    ours = len(pairs & truth)
    encodings = phash_mod.PHash(verbose=False)
    files = {str(p.relative_to(data)): str(p) for p in data.rglob("*.*")}
    enc = {k: encodings.encode_image(image_file=v) for k, v in files.items()}
    dups = encodings.find_duplicates(encoding_map=enc, max_distance_threshold=10)
    theirs_pairs = {frozenset((files[a], files[b])) for a, bs in dups.items() for b in bs}
    theirs = len(theirs_pairs & truth)
    assert ours >= theirs and ours >= 25, (ours, theirs)
    mirrored = {c for c, k in kinds.items() if k == "mirror"}
    assert all(any(m in g for g in found) for m in mirrored)  # the hash of the mirror finds them
    assert report.thresholds.packed and any("close" in n for n in report.notes)


# -- the report --------------------------------------------------------------------------------------------------
def _small_folder(root: Path, photos) -> Path:
    data = root / "data"
    for cls, names in (("x", ("astronaut", "chelsea")), ("y", ("coffee", "rocket"))):
        (data / cls).mkdir(parents=True)
        for n in names:
            Image.open(photos[n]).convert("RGB").save(data / cls / f"{n}.png")
    shutil.copy(data / "x" / "chelsea.png", data / "y" / "chelsea.png")
    Image.open(photos["coffee"]).convert("RGB").save(data / "x" / "coffee.jpg", quality=85)
    (data / "y" / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (data / "y" / "notes.txt").write_text("not an image")
    return data


def test_report_is_strict_json_and_says_what_it_used(tmp_path, photos):
    """Audit without a model: strict JSON (no NaN), thresholds with reasons, exact and near groups, errors and ignored
    files; `describe` text lines.
    """
    data = _small_folder(tmp_path, photos)
    report = run(audit(data, None))
    doc = json.loads(report.to_json(), parse_constant=_refuse)  # NaN / Infinity would raise
    assert doc["model"] is None and doc["thresholds"]["hash_distance"] == D.HASH_DISTANCE
    assert doc["thresholds"]["cosine"] is None and "pixels_why" in doc["thresholds"]
    assert [sorted(Path(p).name for p in g["paths"]) for g in doc["exact_groups"]] == [["chelsea.png"] * 2]
    assert doc["exact_groups"][0]["similarity"] is None  # not measured without a model: null, not NaN
    (near,) = doc["near_groups"]
    assert sorted(Path(p).name for p in near["paths"]) == ["coffee.jpg", "coffee.png"]
    assert near["members"][1]["hash_distance"] <= 2 and near["members"][1]["signals"] == ["phash", "pixels"]
    assert [Path(p).name for p, _ in doc["errors"]] == ["broken.jpg"]
    assert [Path(p).name for p, _ in doc["ignored"]] == ["notes.txt"]
    text = report.describe(top=1)
    assert "model: none" in text and "phash ≤ 10 of 64 bits" in text and "1 more groups, see --json" in text
    assert "Unreadable files (1):" in text and "broken.jpg" in text


def test_cli_audit_exit_status_text_and_json(tmp_path, photos):
    """`vitstudio audit` exits 1 with an unreadable file, 0 without, 2 for `--hash-distance 65` (exit codes only)."""
    from vitstudio.cli import main

    data = _small_folder(tmp_path, photos)
    model = str(bundled_demo())
    assert main(["audit", str(data), "--model", model, "--quiet", "--top", "1"]) == 1  # broken.jpg
    (data / "y" / "broken.jpg").unlink()
    assert main(["audit", str(data), "--model", model, "--quiet", "--hash-distance", "0"]) == 0
    assert main(["audit", str(data), "--model", model, "--quiet", "--hash-distance", "65"]) == 2


def test_cli_audit_prints_every_decision(tmp_path, photos, capsys):
    """CLI text names the model, embedding cut and unreadable files; `--json --threshold` records the given cosine and
    its reason and label issues total.
    """
    from vitstudio.cli import main

    data = _small_folder(tmp_path, photos)
    model = str(bundled_demo())
    main(["audit", str(data), "--model", model, "--quiet", "--top", "1"])
    text = capsys.readouterr().out
    assert f"model: {model}" in text and "embedding: feature cosine ≥" in text and "see --json" in text
    assert "Unreadable files (1):" in text
    main(["audit", str(data), "--model", model, "--quiet", "--json", "--threshold", "0.999"])
    doc = json.loads(capsys.readouterr().out, parse_constant=_refuse)
    assert doc["thresholds"]["cosine"] == 0.999 and doc["thresholds"]["cosine_why"] == "given (--threshold)"
    assert doc["model"] == model and len(doc["label_issues"]) == doc["label_issues_total"]
