"""Datasets from a labels file instead of class folders: a CSV of `path,label` rows.

Paths are relative to the CSV's folder or absolute; a row with an empty label is an image not labelled yet (kept
for `suggest` and sorting, ignored for training); an optional first row `path,label` is a header. The scan gives
the same `DatasetScan` as a folder of class folders, so splitting, training, evaluation and the audit take either.
The images are only ever read: nothing is moved, renamed or written next to them.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from vitstudio.core.data.dataset_scan import DatasetError, DatasetScan
from vitstudio.core.data.headers import HeaderCache
from vitstudio.core.data.images import ImageReadError
from vitstudio.core.files import from_spreadsheet
from vitstudio.core.records import UnreadableFile, read_regular_file

MAX_LABELS_BYTES = 1 << 30  # ~10 million rows; a larger "labels file" is a mistake (or /dev/zero)


@dataclass(frozen=True)
class LabelsFile:
    path: Path
    rows: tuple[tuple[Path, str | None], ...]  # every image the file lists, in its order; None: not labelled

    @property
    def labelled(self) -> tuple[tuple[Path, str], ...]:
        return tuple((p, label) for p, label in self.rows if label is not None)

    @property
    def unlabelled(self) -> tuple[Path, ...]:
        return tuple(p for p, label in self.rows if label is None)


def read_labels_file(path: str | Path) -> LabelsFile:
    """The rows of a labels file; a DatasetError naming the line for a row that cannot be read, or for an image
    listed twice with two different labels."""
    path = Path(path).absolute()  # the images' paths are built on it: the same from any working folder
    try:
        # a BOM (spreadsheet exports) is not part of the first path; a file name that is not UTF-8 was written as its
        # own bytes (save_labels) and is read back as the same name
        data = read_regular_file(path, MAX_LABELS_BYTES, "a labels file", "labels file")  # a FIFO never blocks
        text = data.decode("utf-8-sig", errors="surrogateescape")
    except UnreadableFile as exc:  # not a regular file, or over the limit
        raise DatasetError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path} cannot be read as a UTF-8 text file: {exc}") from None
    rows: dict[Path, str | None] = {}
    lines: dict[Path, int] = {}
    for number, row in _csv_rows(path, text):
        cells = [from_spreadsheet(c.strip()) for c in row]  # a formula-like name was written quoted
        if not cells or not any(cells) or cells[0].startswith("#"):
            continue
        if number == 1 and [c.lower() for c in cells[:2]] == ["path", "label"]:
            continue  # the header
        if len(cells) > 2 and any(cells[2:]):
            raise DatasetError(f"{path}, line {number}: expected 'path,label', got {len(cells)} columns (quote a "
                               f"path or label that holds a comma).")
        image = Path(cells[0]).expanduser()
        image = Path(os.path.normpath(image if image.is_absolute() else path.parent / image))  # "../x" spelt out
        label = cells[1] if len(cells) > 1 and cells[1] else None
        if image in rows and rows[image] is not None and label is not None and rows[image] != label:
            raise DatasetError(f"{path}, line {number}: {cells[0]} is labelled '{label}' here and "
                               f"'{rows[image]}' on line {lines[image]}.")
        if rows.get(image) is None:
            rows[image], lines[image] = label, number
    return LabelsFile(path, tuple(rows.items()))


def _csv_rows(path: Path, text: str):
    """(line number, cells) of each row; a row the csv module refuses (a cell over its 131,072-character limit, a
    NUL) is a DatasetError naming the line: no path or label is that long, so the file is not a labels file."""
    reader = csv.reader(io.StringIO(text, newline=""))  # a quoted name holding a newline stays one name
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DatasetError(f"{path}, line {reader.line_num}: {exc}; a labels file holds 'path,label' rows.") \
                from None
        yield reader.line_num, row


def scan_labels_file(path: str | Path) -> DatasetScan:
    """The labels file as a dataset scan (no val/: the split rules decide validation). Its root is the CSV's folder;
    listed files that are missing or unreadable are skipped with the reason, unlabelled rows are left out."""
    labels = read_labels_file(path)
    skipped: list[tuple[str, str]] = []
    sizes: list[tuple[int, int]] = []
    by_class: dict[str, list[Path]] = {}
    headers = HeaderCache(labels.path)
    for image, label in labels.labelled:
        try:
            sizes.append(headers.size(image))  # the header only (remembered): catches missing files and non-images
        except ImageReadError as exc:
            skipped.append((str(image), exc.reason))
            continue
        by_class.setdefault(label, []).append(image)
    headers.save()
    classes = tuple(sorted(by_class))
    if len(classes) < 2:
        found = f"only {classes[0]!r}" if classes else "none"
        raise DatasetError(f"{labels.path} labels fewer than two classes with a readable image ({found}; "
                           f"{len(labels.unlabelled)} rows unlabelled); a classifier needs at least two.")
    counts = Counter({c: len(files) for c, files in by_class.items()})
    too_small = tuple(c for c in classes if counts[c] < 2)
    lo = (min(w for w, _ in sizes), min(h for _, h in sizes))
    hi = (max(w for w, _ in sizes), max(h for _, h in sizes))
    train = {c: tuple(sorted(by_class[c])) for c in classes}
    return DatasetScan(labels.path.parent, classes, train, None, tuple(skipped), (lo, hi), too_small, labels.path)
