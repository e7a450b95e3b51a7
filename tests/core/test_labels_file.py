"""Datasets from a labels file (issue 22 item 2): `path,label` rows, paths relative to the CSV or absolute, rows
without a label ignored for training. The scan is the class-folder scan's structure (same classes, files, split);
finetune, eval, audit and sort take `--labels`, and the image folder is byte-identical afterwards."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset, tree_state
from vitstudio.core.data.datasets import DatasetError, scan_dataset, split_dataset, upstream_split
from vitstudio.core.data.labels_file import read_labels_file, scan_labels_file


def _byte_state(root):
    """Every path under root: size, mtime and a hash of its bytes."""
    return {k: (*v, hashlib.sha256((root / k).read_bytes()).hexdigest() if (root / k).is_file() else None)
            for k, v in tree_state(root).items()}


@pytest.fixture
def flat(tmp_path):
    """(photos folder with no class folders, labels.csv in another folder, {file: colour}, unlabelled files)."""
    classes = make_dataset(tmp_path / "classes", per_class=10)
    photos = tmp_path / "photos"
    photos.mkdir()
    truth = {}
    for n, image in enumerate(sorted(classes.rglob("*.png"))):
        target = photos / f"img_{n:03d}.png"
        shutil.copy(image, target)
        truth[target] = image.parent.name
    unlabelled = [p for n, p in enumerate(sorted(truth)) if n % 10 == 9]
    rows = ["path,label"]
    for n, (image, colour) in enumerate(sorted(truth.items())):
        shown = str(image) if n % 2 else f"../photos/{image.name}"  # relative to the CSV, or absolute
        rows.append(f"{shown},{'' if image in unlabelled else colour}")
    (tmp_path / "project").mkdir()
    labels = tmp_path / "project" / "labels.csv"
    labels.write_text("\n".join(rows) + "\n")
    return photos, labels, truth, unlabelled


def test_read_rows_relative_absolute_unlabelled(flat):
    """Rows with CSV-relative and absolute paths resolve; unlabelled and labelled rows separated correctly."""
    photos, labels, truth, unlabelled = flat
    listed = read_labels_file(labels)
    assert {p.resolve() for p, _ in listed.rows} == {p.resolve() for p in truth}
    assert {p.resolve() for p in listed.unlabelled} == {p.resolve() for p in unlabelled}
    assert {p.resolve(): c for p, c in listed.labelled} == {p.resolve(): c for p, c in truth.items()
                                                             if p not in unlabelled}


def test_bad_rows_are_named_by_line(tmp_path):
    """Conflicting labels, wrong column count and fewer than two classes raise DatasetError naming the line."""
    bad = tmp_path / "bad.csv"
    bad.write_text("a.png,cat\nb.png,dog\na.png,dog\n")
    with pytest.raises(DatasetError, match=r"line 3: a.png is labelled 'dog' here and 'cat' on line 1"):
        read_labels_file(bad)
    bad.write_text("a.png,cat,extra\n")
    with pytest.raises(DatasetError, match="line 1: expected 'path,label'"):
        read_labels_file(bad)
    bad.write_text("a.png,cat\nb.png,\n")
    with pytest.raises(DatasetError, match="fewer than two classes"):
        scan_labels_file(bad)


def test_the_scan_and_split_are_those_of_the_same_files_in_class_folders(tmp_path):
    """Independent reference: the class-folder scanner on the same files.

    A labels-file scan equals the class-folder scan of the same files (classes, train, skipped with reasons) and gives
    the same split; upstream split refused; reference: the class-folder scanner.
    """
    data = make_dataset(tmp_path / "data", per_class=12)
    rows = [f"{p.relative_to(tmp_path).as_posix()},{p.parent.name}" for p in sorted(data.rglob("*.png"))]
    (data / "red" / "gone.png").write_bytes(b"not a png")  # a broken file: skipped by both, with a reason
    rows += ["data/red/gone.png,red", "data/missing.png,blue", "data/blue/000.png,"]  # unlabelled repeat: kept
    labels = tmp_path / "labels.csv"
    labels.write_text("\n".join(rows))
    folder_scan, csv_scan = scan_dataset(data), scan_dataset(labels)  # scan_dataset takes either
    assert csv_scan.classes == folder_scan.classes == ("blue", "green", "red")
    assert csv_scan.train == folder_scan.train and csv_scan.val is None
    assert dict(csv_scan.skipped).keys() == {str(data / "red" / "gone.png"), str(tmp_path / "data" / "missing.png")}
    a, b = split_dataset(folder_scan, 0.25, 3), split_dataset(csv_scan, 0.25, 3)
    assert a.train == b.train and a.val == b.val
    with pytest.raises(DatasetError, match="stratified"):
        upstream_split(csv_scan)


def test_finetune_eval_audit_sort_with_labels_and_the_images_untouched(flat, tmp_path, capsys):
    """`--labels` for finetune (only labelled rows, right classes), eval (reports val accuracy), audit, sort (unlabelled
    too) and linear-probe (same split); sort into the image folder exit 2; image folder byte-identical; folder +
    `--labels` exit 2. [fine-tune]
    """
    from vitstudio.cli import main
    from vitstudio.core.data.datasets import Split

    photos, labels, truth, unlabelled = flat
    before = _byte_state(photos)
    run = tmp_path / "run"
    assert main(["finetune", "--labels", str(labels), "--model", TINY_SPEC, "--preset", "quick", "--out", str(run),
                 "--quiet"]) == 0
    split = Split.from_manifest(json.loads((run / "split.json").read_text()), labels)
    used = {p.resolve() for p, _ in split.train + split.val}
    assert used == {p.resolve() for p in truth if p not in unlabelled}  # the labelled rows, nothing else
    colour = {p.resolve(): c for p, c in truth.items()}
    assert all(split.classes[label] == colour[p.resolve()] for p, label in split.train + split.val)
    capsys.readouterr()
    assert main(["eval", "--labels", str(labels), "--model", str(run)]) == 0
    said = capsys.readouterr().out
    report = json.loads((run / "eval.json").read_text())
    assert f"accuracy {report['accuracy']:.4f} on {len(split.val)} images: the run's validation split" in said
    assert main(["audit", "--labels", str(labels), "--model", str(run), "--json", "--quiet"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert audit["images"] == len(used) and audit["classes"] == ["blue", "green", "red"]
    out = tmp_path / "sorted"
    assert main(["sort", "--labels", str(labels), "--model", str(run), "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.rglob("*.png")) == sorted(p.name for p in truth)  # unlabelled ones too
    # an ordinary engine run on the labels file (linear-probe, 1 epoch): it trains from the same rows
    assert main(["finetune", "--labels", str(labels), "--model", TINY_SPEC, "--preset", "linear-probe",
                 "--epochs", "1", "--out", str(tmp_path / "lp"), "--quiet"]) == 0
    assert json.loads((tmp_path / "lp" / "split.json").read_text()) == json.loads((run / "split.json").read_text())
    assert main(["sort", "--labels", str(labels), "--model", str(run), "--out", str(photos / "sorted")]) == 2
    assert _byte_state(photos) == before  # nothing in the image folder moved, written or touched
    assert sorted(p.name for p in labels.parent.iterdir()) == ["labels.csv"]
    assert main(["finetune", str(photos), "--labels", str(labels), "--model", TINY_SPEC]) == 2
