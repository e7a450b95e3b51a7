"""Exporting the Folder tab's selection without Qt (issue 50 item 6, `vitstudio/app/folder_export.py`): what is
chosen (the rows the filters leave, or a multi-selection), every column, a labels file, class folders through the
sort's journal and its undo, the Training tab's dataset, and the Paint page's masks of the selection as COCO — each
mask decoded here equal to the page's own segmentation of that image; a cancelled export writes nothing, and the
folder itself is never written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from tests.app.test_paint_page import _paint_digit, demo, paint_page_on_digits  # noqa: F401 (demo: a fixture)
from tests.core.test_selection_export import rle_decode
from vitstudio.app.folder_export import PAINT_FIRST, FolderExport
from vitstudio.app.jobs import ScriptRunner
from vitstudio.core.data.labels_file import read_labels_file
from vitstudio.core.files import data_dir
from vitstudio.core.folder.sorting import NestedFoldersError, apply_sort, undo_sort


def _tree(folder: Path) -> list:
    return sorted((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_the_selection_exports_every_way_and_the_folder_is_never_written(demo, tmp_path):  # noqa: F811
    """A confidence filter's rows are what is exported (one row clicked does not shrink it; two or more picked rows do,
    in order, and the description says which); the every-column CSV's paths, predictions and confidences are the
    results' (1e-6), the Labels tab's label overrides the class folder, the fit's out-of-distribution columns are there;
    the labels CSV reads back (`read_labels_file`) as the same images and labels; class folders into the opened folder
    are refused, elsewhere a sort's plan whose copies `undo_sort` removes; "Train on them" writes a labels file under
    the data folder's selections/ (named after the folder) in a job and hands it on once written, one class refused in a
    line; the COCO export of three rows, each annotation decoded by the test's own RLE decoder, equals the Paint page's
    own segmentation of that image; with no paint it says to paint first; a COCO export cancelled after its first step
    (running until then: the tab's Cancel stops it, not the scan) writes nothing and says so (busy on, then off); the
    folder's files are untouched throughout.
    """
    app, folder, page, paths = paint_page_on_digits(demo, tmp_path)
    data, results = Path(folder.folder), folder.results
    said = []
    export = FolderExport(folder, labels=lambda: {results.paths[0]: "zero"})
    export.said.connect(lambda level, line: said.append((level, line)))
    handed = []
    export.train_requested.connect(handed.append)
    _paint_digit(page, folder, paths[0])  # both classes painted on one digit: the others are segmented from it
    before = _tree(data)
    folder.state.min_conf = float(np.median(results.confidence))  # a filter: the rows it leaves are exported
    rows = folder.rows.tolist()
    assert 2 < len(rows) < len(results) and export.chosen().tolist() == rows
    assert export.chosen([rows[0]]).tolist() == rows  # a click on one row to look at it: still the rows shown
    assert export.chosen([5, 2]).tolist() == [2, 5] and export.describe_choice([5, 2]) == "2 images selected in " \
                                                                                           "the table"
    assert export.describe_choice() == f"{len(rows)} images shown"

    export.table_csv(rows, str(tmp_path / "table.csv"))
    with open(tmp_path / "table.csv", encoding="utf-8-sig", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [r["path"] for r in table] == [results.paths[r] for r in rows]
    np.testing.assert_allclose([float(r["confidence"]) for r in table], results.confidence[rows], atol=1e-6)
    assert [r["predicted"] for r in table] == [results.predicted_label(r) for r in rows]
    assert [r["label"] for r in table] == ["zero" if r == 0 else results.given[r] for r in rows]
    assert "out of distribution" in table[0] and said[-1] == ("info", f"Wrote {len(rows)} rows of "
                                                                      f"{len(table[0])} columns to {tmp_path}/"
                                                                      "table.csv")
    export.labels_csv(rows, str(tmp_path / "labels.csv"))
    assert said[-1] == ("info", f"Wrote {len(rows)} rows to {tmp_path}/labels.csv")
    assert read_labels_file(tmp_path / "labels.csv").rows == tuple((Path(p), label) for p, label in export.items(rows))

    try:  # into class folders: a sort's plan (never into the folder), undone from its journal
        export.class_folders(rows, str(data / "out"))
        raise AssertionError("a copy into the folder itself was accepted")
    except NestedFoldersError:
        pass
    done = apply_sort(export.class_folders(rows, str(tmp_path / "out")))
    copied = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.png"))
    assert copied == sorted(f"{label}/{Path(p).name}" for p, label in export.items(rows))
    undo_sort(done.log)
    assert not list((tmp_path / "out").rglob("*.png"))

    assert export.to_training(rows)  # the Training tab's dataset: a labels file in the app's data folder
    (trained,) = handed
    assert Path(trained).parent.parent == data_dir() / "selections"
    assert Path(trained).parent.name.startswith("digits-selection-")  # a run trained on it is named after it
    assert read_labels_file(trained).labelled == tuple((Path(p), label) for p, label in export.items(rows))
    assert not export.to_training(rows[:1]) and "fewer than two classes" in said[-1][1] and len(handed) == 1

    few = rows[:3]
    export.coco(few, str(tmp_path / "masks.json"), page.painted(), tuple(page.paint.state.classes))
    doc = json.loads((tmp_path / "masks.json").read_text())
    assert [i["file_name"] for i in doc["images"]] == [Path(results.paths[r]).relative_to(data).as_posix()
                                                         for r in few]
    for image, row in zip(doc["images"], few):
        folder.select(row)  # the page's own segmentation of the image, one image at a time
        decoded = np.full((image["height"], image["width"]), 255, np.uint8)
        for a in (a for a in doc["annotations"] if a["image_id"] == image["id"]):
            decoded[rle_decode(a["segmentation"]) == 1] = a["category_id"] - 1
        assert page.shown.image == results.paths[row] and (decoded == page.shown.labels).all()
    assert not export.coco(few, str(tmp_path / "none.json"), {}, ("a", "b")) and said[-1] == ("warning", PAINT_FIRST)

    export.jobs.runner = ScriptRunner(hold=True)  # cancelled half-way: nothing written
    busy = []
    export.busy.connect(busy.append)
    export.coco(few, str(tmp_path / "cancelled.json"), page.painted(), tuple(page.paint.state.classes))
    export.jobs.runner.step(export.jobs.pending["coco"])
    assert export.running()  # the tab's Cancel stops the export, not the scan
    export.cancel()
    export.jobs.runner.run()
    assert busy == [True, False] and not (tmp_path / "cancelled.json").exists() and not export.running()
    assert said[-1] == ("info", "Export cancelled: nothing written.")
    assert _tree(data) == before
