"""Exporting a selection (issue 50 item 6; core/folder/selection_export.py, `vitstudio views --export NAME --csv FILE
--coco FILE`): spreadsheet-safe CSVs that round-trip any file name, labels files the dataset reader reads back,
writes that are whole or absent, and a view's masks as COCO checked with an RLE decoder written here."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.core.generators import drain
from tests.core.planted_shapes import planted_folder
from vitstudio.cli import main
from vitstudio.core.data.labels_file import read_labels_file
from vitstudio.core.dense.painted import UNPAINTED
from vitstudio.core.dense.segment import segment_folder
from vitstudio.core.folder import selection_export, views
from vitstudio.core.models.loading import load_model

SPEC = "custom:img=64,patch=8,width=32,depth=2,heads=2,classes=2"  # as test_dense's: an 8×8 grid
NAMES = ["plain.png", "a,b.png", 'say "hi".png', "two\nlines.png", "=HYPERLINK(x).png", "+1.png", "-x.png",
         "@me.png", "café é.png", "\udcff\udcfe.png"]  # the last: bytes that are not UTF-8


def _read(path) -> tuple[bytes, list[list[str]]]:
    raw = Path(path).read_bytes()
    return raw, list(csv.reader(io.StringIO(raw.decode("utf-8-sig", "surrogateescape"), newline="")))


def _safe(text: str) -> str:
    """OWASP's rule, written here: a cell a spreadsheet would run as a formula gets an apostrophe before it."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def test_csvs_are_spreadsheet_safe_round_trip_any_name_and_are_whole_or_absent(tmp_path, monkeypatch):
    """Ten file names (comma, quotes, newline, =, +, -, @, accents, bytes that are not UTF-8) in the every-column CSV:
    UTF-8 with a BOM, each path, name, label and tag cell read back by `csv` equal to OWASP's rule written in the test
    (an apostrophe before = + - @ tab CR), numbers as numbers (-0.5 unprefixed, NaN empty); the labels CSV reads back
    through `read_labels_file` as the same paths and labels (a quoted newline in a name was read as no newline: fixed
    there); a full disk at the rename (`VITSTUDIO_FULL_AT`) raises ENOSPC naming the file, the old file whole, no
    temporary left; a folder as the target, or a path under a file, is one line "could not write TARGET: …" (not the
    temporary's name), and columns of different lengths are refused.
    """
    folder = tmp_path / "data"
    (folder / "cats").mkdir(parents=True)
    paths = [str(folder / "cats" / n) for n in NAMES]
    for p in paths:
        Path(p).write_bytes(b"")
    scores = [-0.5, float("nan"), *np.linspace(0, 1, len(NAMES) - 2).tolist()]
    tags = [{"keep", "=odd"}, set(), *[{"x"}] * (len(NAMES) - 2)]
    columns = selection_export.file_columns(paths, ["cats"] * len(paths), tags, {paths[1]: "-dog"})
    columns["score"] = scores
    out = tmp_path / "every column.csv"
    assert selection_export.write_table_csv(out, columns) == len(NAMES)
    raw, rows = _read(out)
    assert raw.startswith(b"\xef\xbb\xbf") and b"caf\xc3\xa9" in raw and b"\xff\xfe.png" in raw  # BOM, UTF-8, bytes
    assert rows[0] == ["path", "file", "class folder", "label", "tags", "score"] and len(rows) == len(NAMES) + 1
    for row, path, name, tag, score in zip(rows[1:], paths, NAMES, tags, scores):
        assert row[:2] == [_safe(path), _safe(name)]
        assert row[4] == ";".join(_safe(t) if i == 0 else t for i, t in enumerate(sorted(tag)))
        assert row[5] == ("" if np.isnan(score) else repr(round(score, 6)))  # numbers stay numbers: -0.5, no '
    assert rows[2][3] == "'-dog" and rows[1][3] == "cats"

    labels = tmp_path / "labels.csv"  # a labels file reads back as the same names and labels
    items = [(p, "=cat" if i % 2 else None) for i, p in enumerate(paths)]
    assert selection_export.write_labels_csv(labels, items) == len(paths)
    assert read_labels_file(labels).rows == tuple((Path(p), label) for p, label in items)

    before = out.read_bytes()  # a full disk at the rename: the old file stays whole, no temporary is left
    monkeypatch.setenv("VITSTUDIO_FULL_AT", f"before-rename-{out.name}")
    with pytest.raises(OSError, match="No space left") as caught:
        selection_export.write_table_csv(out, {"path": ["other"]})
    assert caught.value.filename == str(out) and out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "every column.csv", "labels.csv"]
    monkeypatch.delenv("VITSTUDIO_FULL_AT")
    (tmp_path / "a file").write_text("")
    for target, why in ((folder, "a folder is there"), (tmp_path / "a file" / "x.csv", "")):  # one line, the target
        with pytest.raises(OSError) as caught:
            selection_export.write_labels_csv(target, items)
        assert str(caught.value).startswith(f"could not write {target}: {why}") and "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a file", "data", "every column.csv", "labels.csv"]
    with pytest.raises(ValueError, match="differ in length"):
        selection_export.table_rows({"a": [1, 2], "b": [1]})


def rle_decode(segmentation: dict) -> np.ndarray:
    """COCO's compressed RLE, decoded from its definition (pycocotools' rleFrString, maskApi.c): each count in 5-bit
    groups, 0x20 = more groups, 0x10 of the last = negative; from the third count on, a delta against the count two
    before; runs alternate 0 and 1 from 0, in column-major order."""
    s, counts, p = segmentation["counts"], [], 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p, k = p + 1, k + 1
            if not more and c & 0x10:
                x |= -1 << (5 * k)
        counts.append(x + (counts[-2] if len(counts) > 2 else 0))
    h, w = segmentation["size"]
    flat = np.repeat(np.arange(len(counts)) % 2, counts).astype(np.uint8)
    return flat.reshape(w, h).T


def test_a_views_masks_and_columns_export_from_the_command_line(tmp_path, capsys):
    """`views --export V --coco F --masks P` writes the view's images only, each class's pixels decoded here equal to
    `vitstudio segment`'s mask of that image (painted pixels standing); `--csv` holds every column of the view.

    A view of three tagged planted images: `--coco` holds exactly them (file names relative to the folder,
    background/object categories), each annotation decoded by an RLE decoder written from pycocotools' rleFrString equal
    to `segment_folder`'s mask of that image, area and bbox from the decoded pixels; `--csv` (with --model) holds every
    column, the tag, confidences equal to a bare forward through timm's eval transform (1e-5) and the brain's four
    scores among the view's images, hardness equal to the entropy of that forward (1e-4); `--coco` without `--masks` is
    one line, exit 2.
    """
    truth = planted_folder(tmp_path / "images", 6)
    paths = sorted(truth)
    painted = tmp_path / "painted"
    painted.mkdir()
    for p in paths[:2]:
        mask = np.full(truth[p].shape, UNPAINTED, np.uint8)
        mask[truth[p] == 1], mask[:6] = 1, 0
        Image.fromarray(mask).save(painted / f"{Path(p).stem}.png")
    chosen = paths[1:4]
    views.tag(tmp_path / "images", chosen, add=["look"])
    views.save_view(tmp_path / "images", "look", [{"field": "tags", "op": "any", "value": ["look"]}])
    torch.manual_seed(0)
    loaded = load_model(SPEC, None, "cpu", "fp32")
    expected = drain(segment_folder(loaded, str(tmp_path / "images"), str(painted), tmp_path / "all"))
    coco, table = tmp_path / "out" / "look.json", tmp_path / "out" / "look.csv"
    torch.manual_seed(0)  # the same random weights
    assert main(["views", str(tmp_path / "images"), "--export", "look", "--coco", str(coco), "--masks", str(painted),
                 "--csv", str(table), "--model", SPEC, "--device", "cpu"]) == 0, capsys.readouterr().err
    assert "look.json" in capsys.readouterr().err
    doc = json.loads(coco.read_text())
    assert [i["file_name"] for i in doc["images"]] == [os.path.relpath(p, tmp_path / "images") for p in chosen]
    assert [c["name"] for c in doc["categories"]] == ["background", "object"]
    for image in doc["images"]:
        full = str(tmp_path / "images" / image["file_name"])
        written = np.asarray(Image.open(next(r.mask for r in expected.images if r.file == full)))
        assert (image["height"], image["width"]) == written.shape
        found = [a for a in doc["annotations"] if a["image_id"] == image["id"]]
        assert sorted(a["category_id"] for a in found) == [k + 1 for k in np.unique(written) if k < 2]
        for a in found:
            decoded = rle_decode(a["segmentation"])
            assert (decoded == (written == a["category_id"] - 1)).all() and a["area"] == int(decoded.sum())
            ys, xs = np.nonzero(decoded)
            assert a["bbox"] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
    _, rows = _read(table)
    assert rows[0][:9] == ["path", "file", "class folder", "label", "tags", "predicted", "confidence", "margin",
                           "correct"]
    assert [r[0] for r in rows[1:]] == chosen and {r[4] for r in rows[1:]} == {"look"}
    with torch.no_grad():  # timm's own eval transform and a bare forward
        logits = loaded.model(torch.stack([loaded.transform(Image.open(p).convert("RGB")) for p in chosen]))
    np.testing.assert_allclose([float(r[6]) for r in rows[1:]], logits.softmax(-1).max(-1).values, atol=1e-5)
    assert rows[0][9:] == ["uniqueness", "representativeness", "hardness", "mistakenness"]  # the brain's, of the view
    p = logits.double().softmax(-1).numpy()
    np.testing.assert_allclose([float(r[11]) for r in rows[1:]], -(p * np.log(p)).sum(1), atol=1e-4)  # entropy
    assert main(["views", str(tmp_path / "images"), "--export", "look", "--coco", str(coco)]) == 2  # no --masks
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
