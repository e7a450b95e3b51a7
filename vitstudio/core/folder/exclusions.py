"""The label review's exclusions of a dataset (images left out of training, the folder itself untouched), kept in
the app's data folder keyed by the dataset's resolved path, so they survive a restart and never touch the dataset."""

from __future__ import annotations

import os
from pathlib import Path

from vitstudio.core.files import dataset_dir
from vitstudio.core.records import read_json_file, write_json_file


def _exclusions_path(dataset: str | Path) -> Path:
    return dataset_dir(dataset) / "exclusions.json"


def read_exclusions(dataset: str | Path) -> list[str]:
    """Images of `dataset` the label review left out of training, as absolute paths; those no longer on disk are
    dropped (moved or deleted since)."""
    paths = read_json_file(_exclusions_path(dataset)).get("excluded", [])
    return sorted(p for p in paths if isinstance(p, str) and os.path.exists(p))


def write_exclusions(dataset: str | Path, paths) -> None:
    record = {"dataset": str(Path(dataset).resolve()), "excluded": sorted({os.path.abspath(p) for p in paths})}
    write_json_file(_exclusions_path(dataset), record)
