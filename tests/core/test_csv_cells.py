"""Every CSV the app writes is safe to open in a spreadsheet (issue 29, item 16): a text cell a spreadsheet would run
as a formula (it starts with =, +, -, @, a tab or CR: OWASP's CSV-injection rule) is written with a leading
apostrophe, shown as text there; numbers are written as they are; the labels file, which the app reads back, gives
back the names as they were."""

from __future__ import annotations

import csv
import io

import numpy as np

from vitstudio.core.analysis.export import write_result
from vitstudio.core.data.labels_file import read_labels_file
from vitstudio.core.files import FORMULA_START, spreadsheet_safe
from vitstudio.core.inference import Prediction, write_csv
from vitstudio.core.train.labelling import save_labels

HOSTILE = ['=HYPERLINK("http://x","y")', "+1+2", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


def test_predict_csv_quotes_formula_cells_and_leaves_numbers():
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
    images = [str(tmp_path / f"{i}.png") for i in range(len(HOSTILE))]
    labels = {p: name.strip() or "x" for p, name in zip(images, HOSTILE)}
    save_labels(tmp_path / "labels.csv", labels, images)
    text = (tmp_path / "labels.csv").read_text()
    assert "'=HYPERLINK" in text and "'@SUM(A1)" in text and "\n=" not in text and ",=" not in text
    back = dict((str(p), label) for p, label in read_labels_file(tmp_path / "labels.csv").labelled)
    assert back == labels  # the names as they were (the CSV reader and the strip keep "=…", "+1+2", "-2+3", "@…")


def test_numbers_stay_numbers_in_exported_arrays(tmp_path):
    write_result(tmp_path / "map.csv", np.array([[-0.5, 1.0], [2.5, -3.0]]), {"method": "x"})
    assert list(csv.reader((tmp_path / "map.csv").open())) == [["-0.5", "1.0"], ["2.5", "-3.0"]]
    assert spreadsheet_safe(-1.5) == -1.5 and spreadsheet_safe("cat") == "cat"
