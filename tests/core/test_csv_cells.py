"""Every CSV the app writes is safe to open in a spreadsheet (issue 29, item 16): a text cell a spreadsheet would run
as a formula (it starts with =, +, -, @, a tab or CR: OWASP's CSV-injection rule) is written with a leading
apostrophe, shown as text there; numbers are written as they are; the labels file, which the app reads back, gives
back the names as they were."""

from __future__ import annotations

import csv
import io
import os
import shutil
import sys

import numpy as np
import pytest

from vitstudio.core.analysis.export import write_result
from vitstudio.core.data.labels_file import read_labels_file
from vitstudio.core.files import FORMULA_START, spreadsheet_safe
from vitstudio.core.inference import Prediction, write_csv
from vitstudio.core.train.labelling import save_labels

HOSTILE = ['=HYPERLINK("http://x","y")', "+1+2", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


def test_predict_csv_quotes_formula_cells_and_leaves_numbers():
    """predict's CSV: file names, class names and error messages starting with = + - @ tab CR get a leading apostrophe;
    probabilities and indices stay numbers.
    """
    preds = [Prediction(path=name + ".png", indices=(0, 1), labels=(HOSTILE[(i + 1) % 6], "cat"), probs=(0.75, 0.25))
             for i, name in enumerate(HOSTILE)] + [Prediction(path="=bad.png", error="-unreadable")]
    out = io.StringIO()
    write_csv(preds, out, topk=2)
    rows = list(csv.reader(io.StringIO(out.getvalue())))[1:]
    for row, pred in zip(rows, preds):
        assert row[0] == "'" + pred.path  # the file name: text, not a formula
        for cell in row:
            assert not cell.startswith(FORMULA_START), row
    assert rows[0][2:5] == ["'+1+2", "0.750000", "0"]  # a class name quoted; its probability and index as numbers
    assert rows[-1][1] == "'-unreadable"  # the error message too


def test_labels_file_round_trips_formula_like_names(tmp_path):
    """The labels file (read back by the app) is written quoted and read back to the original names."""
    images = [str(tmp_path / f"{i}.png") for i in range(len(HOSTILE))]
    labels = {p: name.strip() or "x" for p, name in zip(images, HOSTILE)}
    save_labels(tmp_path / "labels.csv", labels, images)
    text = (tmp_path / "labels.csv").read_text()
    assert "'=HYPERLINK" in text and "'@SUM(A1)" in text and "\n=" not in text and ",=" not in text
    back = dict((str(p), label) for p, label in read_labels_file(tmp_path / "labels.csv").labelled)
    assert back == labels  # the names as they were (the CSV reader and the strip keep "=…", "+1+2", "-2+3", "@…")


def test_numbers_stay_numbers_in_exported_arrays(tmp_path):
    """An exported array's negative numbers are not quoted."""
    write_result(tmp_path / "map.csv", np.array([[-0.5, 1.0], [2.5, -3.0]]), {"method": "x"})
    assert list(csv.reader((tmp_path / "map.csv").open())) == [["-0.5", "1.0"], ["2.5", "-3.0"]]
    assert spreadsheet_safe(-1.5) == -1.5 and spreadsheet_safe("cat") == "cat"


@pytest.mark.skipif(sys.platform != "linux", reason="Linux file names may be any bytes (macOS and Windows refuse)")
def test_a_file_name_that_is_not_utf8_keeps_its_row_and_its_bytes(tmp_path):
    """Issue 29, item 15: `predict --csv` stopped at such a name with a traceback, the CSV cut there (1 of 4 lines);
    now every row is written, the name as its own bytes (it names the file on disk), and the labels file reads it
    back as the same name.

    [Linux only]
    """
    from vitstudio.cli import main
    from vitstudio.core.models.demo import bundled_demo, sample_images

    sample = sample_images()[0]
    folder = tmp_path / "images"
    folder.mkdir()
    odd = os.fsdecode(b"caf\xe9-latin1.png")  # a name written by an old Latin-1 system: not UTF-8
    for name in ("a.png", odd, "z.png"):
        shutil.copy(sample, folder / name)
    assert main(["predict", str(folder), "--model", str(bundled_demo()), "--csv", str(tmp_path / "p.csv"),
                 "--quiet"]) == 0
    with open(tmp_path / "p.csv", newline="", encoding="utf-8", errors="surrogateescape") as fh:
        paths = [row[0] for row in csv.reader(fh)][1:]
    assert sorted(paths) == sorted(str(folder / n) for n in ("a.png", odd, "z.png"))
    assert b"caf\xe9-latin1.png" in (tmp_path / "p.csv").read_bytes()

    save_labels(tmp_path / "labels.csv", {str(folder / odd): "cat"}, [str(folder / odd)])
    assert read_labels_file(tmp_path / "labels.csv").labelled == ((folder / odd, "cat"),)
