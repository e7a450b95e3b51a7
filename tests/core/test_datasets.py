"""Folder datasets: layouts, validation messages, deterministic stratified splits, manifests."""

from __future__ import annotations

import json

import pytest

from tests.core.synthetic_data import make_dataset
from vitstudio.core.data.datasets import DatasetError, Split, scan_dataset, split_dataset


def test_scan_reports_classes_counts_sizes_and_skips(tmp_path):
    """classes, per-class counts (upper-case extensions counted), skipped non-images/broken files, size range."""
    root = make_dataset(tmp_path / "d", per_class=5)
    (root / "red" / "notes.txt").write_text("x")
    (root / "red" / "broken.JPG").write_bytes(b"\xff\xd8 not really")
    (root / "blue" / "UPPER.PNG").write_bytes((root / "blue" / "000.png").read_bytes())
    scan = scan_dataset(root)
    assert scan.classes == ("blue", "green", "red")
    assert scan.counts == {"blue": 6, "green": 5, "red": 5}
    assert {p.split("/")[-1] for p, _ in scan.skipped} == {"notes.txt", "broken.JPG"}
    assert scan.size_range == ((32, 32), (32, 32)) and scan.val is None


def test_train_val_layout(tmp_path):
    """A train/validation folder layout is used as the split (no ratio)."""
    make_dataset(tmp_path / "d" / "train", per_class=4)
    make_dataset(tmp_path / "d" / "validation", per_class=2, seed=1)
    split = split_dataset(scan_dataset(tmp_path / "d"))
    assert len(split.train) == 12 and len(split.val) == 6 and split.val_ratio is None


@pytest.mark.parametrize("case, message", [("empty", "no class subfolders"), ("one", "only one class"),
                                           ("unreadable", "No readable image"), ("missing", "not a folder")])
def test_clear_errors(tmp_path, case, message):
    """Empty root, one class, unreadable class, missing folder each raise DatasetError with a clear message.
    [parametrised ×4]
    """
    root = tmp_path / "d"
    root.mkdir()
    if case == "one":
        make_dataset(root, per_class=3, classes={"red": (255, 0, 0)})
    elif case == "unreadable":
        make_dataset(root, per_class=3)
        (root / "empty_class").mkdir()
        (root / "empty_class" / "x.jpg").write_bytes(b"")
    elif case == "missing":
        root = tmp_path / "nope"
    with pytest.raises(DatasetError, match=message):
        scan_dataset(root)


def test_split_is_stratified_deterministic_and_reproducible(tmp_path):
    """Same seed same split, other seed differs, 20 % per class, disjoint; the manifest reproduces the split after the
    folder moves.
    """
    root = make_dataset(tmp_path / "d", per_class=10)
    scan = scan_dataset(root)
    a, b = split_dataset(scan, 0.2, seed=3), split_dataset(scan, 0.2, seed=3)
    assert a.train == b.train and a.val == b.val
    assert split_dataset(scan, 0.2, seed=4).val != a.val
    assert sorted(label for _, label in a.val) == [0, 0, 1, 1, 2, 2]  # 20 % of 10 per class
    assert not set(a.train) & set(a.val)
    manifest = json.loads(json.dumps(a.to_manifest()))
    moved = tmp_path / "elsewhere"
    root.rename(moved)
    again = Split.from_manifest(manifest, moved)  # the same split on another machine / path
    assert [p.relative_to(moved) for p, _ in again.val] == [p.relative_to(root) for p, _ in a.val]


def test_too_small_class_cannot_be_split(tmp_path):
    """A class with one image is reported in `too_small` and splitting raises "fewer than 2 images"."""
    root = make_dataset(tmp_path / "d", per_class=3)
    for f in list((root / "red").iterdir())[1:]:
        f.unlink()
    scan = scan_dataset(root)
    assert scan.too_small == ("red",)
    with pytest.raises(DatasetError, match="fewer than 2 images"):
        split_dataset(scan)


def test_a_second_scan_reads_no_header_it_has_seen_and_a_rewrite_is_read_again(tmp_path, monkeypatch):
    """Headers are remembered per file under the cache folder (nothing written to the dataset): a second scan opens
    no image; a file rewritten with its size and mtime restored (its ctime moved) is read again and skipped as what
    it now is; a file that failed is checked every time; a lowered pixel limit holds for remembered sizes too."""
    import os

    from PIL import Image

    from vitstudio.core.data import headers
    from vitstudio.core.data.images import image_size

    root = make_dataset(tmp_path / "d", per_class=4)
    broken, big = root / "red" / "broken.png", root / "red" / "big.png"
    broken.write_bytes(b"not an image")
    Image.new("RGB", (40, 40)).save(big)
    listing = sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*"))
    read = []
    monkeypatch.setattr(headers, "image_size", lambda p: read.append(str(p)) or image_size(p))
    first = scan_dataset(root)
    assert len(read) == 14 and first.counts == {"blue": 4, "green": 4, "red": 5}
    read.clear()
    second = scan_dataset(root)
    assert read == [str(broken)]  # only the file that failed, again
    assert (second.train, second.skipped, second.size_range) == (first.train, first.skipped, first.size_range)
    assert sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*")) == listing  # the dataset untouched
    victim = root / "blue" / "001.png"
    st = victim.stat()
    victim.write_bytes(b"x" * st.st_size)  # the same size, then the same mtime: only its ctime tells
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    read.clear()
    third = scan_dataset(root)
    assert sorted(read) == sorted([str(victim), str(broken)])
    assert third.counts["blue"] == 3 and "not an image" in dict(third.skipped)[str(victim)]
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 32 * 32)
    read.clear()
    fourth = scan_dataset(root)
    assert str(big) not in read and "image too large" in dict(fourth.skipped)[str(big)]
    assert fourth.size_range == ((32, 32), (32, 32))
