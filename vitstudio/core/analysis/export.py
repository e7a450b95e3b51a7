"""Writing an analysis result to disk: the raw array and every parameter that produced it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from vitstudio.core.files import SafeCsvWriter

DATA_SUFFIXES = (".npy", ".json", ".csv")


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return value


def write_result(path: str | Path, array: np.ndarray, params: dict, extra: dict | None = None) -> list[Path]:
    """.npy: the float32 array, plus a `.json` sidecar with the parameters; .json: array + parameters;
    .csv: a 1-D or 2-D array as rows (higher dimensions are refused), parameters in a sidecar. Returns the files."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        raise ValueError(f"Use one of {', '.join(DATA_SUFFIXES)} for data export, not '{suffix}'.")
    array = np.asarray(array, dtype=np.float32)
    meta = {k: _plain(v) for k, v in params.items()}
    doc = {"params": meta, "shape": list(array.shape), **{k: _plain(v) for k, v in (extra or {}).items()}}
    written = [path]
    if suffix == ".json":
        path.write_text(json.dumps({**doc, "array": array.tolist()}))
        return written
    if suffix == ".npy":
        np.save(path, array)
    else:
        if array.ndim > 2:
            raise ValueError(f"A CSV holds 1-D or 2-D data; this array is {array.ndim}-D: use .npy or .json.")
        with path.open("w", newline="", encoding="utf-8") as fh:
            SafeCsvWriter(fh).writerows(np.atleast_2d(array).tolist())
    sidecar = path.with_suffix(path.suffix + ".json")
    sidecar.write_text(json.dumps(doc, indent=1))
    written.append(sidecar)
    return written
