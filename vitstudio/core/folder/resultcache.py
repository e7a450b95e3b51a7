"""Results of whole-folder analyses (the audit's report, the probes per layer) kept on disk under a key of all
they were computed from: the files' names and contents (`KeyedRows.content_key`, from the same lookups that served
their cached features), the model's cache key, the labels and the settings. Running the analysis again on an
unchanged folder reads its result instead of refitting; any change of a file, a label or a setting is another key.

Under the user's cache folder (`<cache>/results/<kind>/<key>.pickle`), written atomically; the newest KEEP results
of each kind are kept. The files are pickles the app wrote into the user's own cache folder (as trusted as the
rest of it); a file that cannot be read back (another version's classes) is a miss, and is replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
from pathlib import Path

from vitstudio.core.files import atomic_write_bytes, cache_dir

FORMAT = "v1"  # bump when a cached result's classes change shape
KEEP = 8  # results kept per kind (the newest)


def results_root() -> Path:
    return cache_dir() / "results" / FORMAT


def result_key(*parts) -> str:
    """A key of plain JSON parts (strings, numbers, lists, dicts)."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def load_result(kind: str, key: str):
    """The result stored under `key`, or None."""
    path = results_root() / kind / f"{key}.pickle"
    try:
        with open(path, "rb") as f:
            value = pickle.load(f)  # noqa: S301 (the app's own file in the user's cache folder)
    except FileNotFoundError:
        return None
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: kept by the pruning below
    return value


def save_result(kind: str, key: str, value) -> None:
    folder = results_root() / kind
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / f"{key}.pickle", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    older = sorted(folder.glob("*.pickle"), key=_mtime, reverse=True)[KEEP:]
    for path in older:
        with contextlib.suppress(OSError):
            path.unlink()


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:  # removed by another process meanwhile
        return 0
