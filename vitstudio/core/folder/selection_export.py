"""Exporting a selection of a folder's images: into class folders (a sort's plan, so the sort's
journal and undo carry it), as a labels file (`core/data/labels_file.py` reads it back: a dataset for finetune, audit
and the Training tab) or as a CSV of every column. Torch-free; the Folder tab (`app/folder_export.py`) and
`vitstudio views --export` share it. The masks' COCO is the dense segmentation's (`core/dense/export.py`).

Every file is written whole or not at all (`atomic_write_bytes`: a temporary file beside the target, renamed over it),
so a full disk or an unwritable folder leaves no half-written CSV, only an OSError that names the file. The CSVs open
in a spreadsheet as written: UTF-8 with a byte-order mark (Excel reads accents), a text that would run as a formula
(= + - @, OWASP's CSV-injection rule) written behind an apostrophe, and any file name — commas, quotes, newlines, bytes
that are not UTF-8 — quoted by `csv` so that it reads back as the same name.
"""

from __future__ import annotations

import errno
import hashlib
import io
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from vitstudio.core.files import SafeCsvWriter, atomic_write_bytes, data_dir, shown_path
from vitstudio.core.folder.sorting import SortPlan, plan_sort, safe_folder_name

UNLABELLED = "unlabelled"  # the class folder of images that have no label (as `vitstudio views --export --out`)
BOM = "\ufeff"


def csv_bytes(header: Sequence[str], rows, bom: bool = True) -> bytes:
    """The rows as CSV text (spreadsheet-safe cells), UTF-8 with a byte-order mark unless `bom` is False; a file
    name that is not UTF-8 (surrogate escapes) is written as its own bytes."""
    text = io.StringIO(newline="")
    writer = SafeCsvWriter(text)
    writer.writerow(header)
    writer.writerows(rows)
    return ((BOM if bom else "") + text.getvalue()).encode("utf-8", "surrogateescape")


class ExportWriteError(OSError):
    """A file of an export that could not be written, said in one line naming it (not the temporary beside it, nor
    a parent folder); its errno is the system's (a full disk is still told apart)."""

    def __str__(self) -> str:
        return f"could not write {shown_path(self.filename)}: {self.strerror}"


def write_whole(path: str | os.PathLike, data: bytes) -> Path:
    """`data` into `path` atomically (never half-written), or an `ExportWriteError`."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "a folder is there, not a file")
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise ExportWriteError(exc.errno, exc.strerror or str(exc), str(path)) from None
    return path


def labels_rows(items: Sequence[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """(absolute path, label or '') rows of a labels file, each image once (its first label)."""
    seen: dict[str, str] = {}
    for path, label in items:
        seen.setdefault(os.path.abspath(path), label or "")
    return list(seen.items())


def write_labels_csv(path: str | os.PathLike, items: Sequence[tuple[str, str | None]]) -> int:
    """A labels file (path,label; absolute paths; an image with no label has an empty one) of `items`; returns the
    number of rows."""
    rows = labels_rows(items)
    write_whole(path, csv_bytes(("path", "label"), rows))
    return len(rows)


def cell(value):
    """A column's value as a CSV cell: '' for nothing (None, NaN), tag sets as 'a;b' (sorted), yes/no, floats to 6
    decimals (numbers stay numbers: a spreadsheet sorts them)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # a numpy scalar
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (set, frozenset, list, tuple)):
        return ";".join(sorted(map(str, value)))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return round(value, 6)
    return value if isinstance(value, (int, str)) else str(value)  # a Path: text, so it is made safe as text


def table_rows(columns: Mapping[str, Sequence]) -> list[list]:
    """The rows of `columns` (name -> one value per image, every column as long), as CSV cells."""
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"the columns differ in length ({sorted(lengths)}): one value per image in each")
    return [[cell(v) for v in row] for row in zip(*columns.values())]


def file_columns(paths: Sequence[str], given: Sequence[str], tags: Sequence, labels: Mapping[str, str]
                 ) -> dict[str, list]:
    """The columns every caller has: path, file name, class folder, label (the one given on the Labels tab, else
    the class folder) and tags."""
    return {"path": list(paths), "file": [os.path.basename(p) for p in paths], "class folder": list(given),
            "label": [labels.get(p) or g for p, g in zip(paths, given)], "tags": list(tags)}


def selection_columns(results, rows, tags: Sequence, labels: Mapping[str, str], fit=None, report=None,
                      extra: Mapping[str, Sequence] | None = None) -> dict[str, list]:
    """Every column of the rows of a folder's results: `file_columns`, the prediction, confidence, margin and
    correctness, then the out-of-distribution score and flag (when the fit was computed), the label review's (when it
    ran) and any `extra` columns of the results (one value per results row: the brain's scores)."""
    rows = np.asarray(rows, np.int64)
    paths = [results.paths[r] for r in rows]
    predicts = results.has_predictions
    columns = file_columns(paths, [results.given[r] for r in rows], tags, labels)
    columns.update({"predicted": [results.predicted_label(r) for r in rows],
                    "confidence": [float(results.confidence[r]) if predicts else None for r in rows],
                    "margin": [float(results.margin[r]) if predicts else None for r in rows],
                    "correct": [{1: True, 0: False}.get(int(c)) for c in results.correct()[rows]]})
    if fit is not None and fit.scores.calibrated:
        columns["out of distribution score"] = [float(fit.scores.scores[r]) for r in rows]
        columns["out of distribution"] = [bool(fit.scores.flagged[r]) for r in rows]
    if report is not None and report.label_issues:
        issues = {i.path: i for i in report.label_issues}
        found = [issues.get(p) for p in paths]
        columns["label quality"] = [None if i is None else i.quality for i in found]
        columns["suggested label"] = [None if i is None else i.suggested for i in found]
        columns["label doubtful"] = [None if i is None else i.flagged for i in found]
    for name, values in (extra or {}).items():
        columns[name] = [values[r] for r in rows]
    return columns


def write_table_csv(path: str | os.PathLike, columns: Mapping[str, Sequence]) -> int:
    """A CSV of every column given (a row per image, the header their names); returns the number of rows."""
    rows = table_rows(columns)
    write_whole(path, csv_bytes(tuple(columns), rows))
    return len(rows)


def class_folder_plan(items: Sequence[tuple[str, str | None]], out: str | os.PathLike, move: bool = False
                      ) -> SortPlan:
    """Copy (or move) each image into OUT/<its label>/ (OUT/unlabelled/ without one): a sort's plan, carried out and
    undone as a sort is (`sorting.apply_sort`, `undo_sort`)."""
    return plan_sort([(str(path), label or UNLABELLED, 1.0) for path, label in items], out, move=move)


def selection_labels_file(items: Sequence[tuple[str, str | None]], name: str = "folder") -> Path:
    """The selection as a labels file in the app's data folder (selections/), never in the user's folder: the
    Training tab's dataset. Its folder is named after `name` (the folder it was chosen in: a run trained on it is
    named after that) and its content, so the same selection is the same file."""
    data = csv_bytes(("path", "label"), labels_rows(items))
    folder = f"{safe_folder_name(name)}-selection-{hashlib.sha256(data).hexdigest()[:8]}"
    target = data_dir() / "selections" / folder / "labels.csv"
    if not target.is_file():
        write_whole(target, data)
    return target
