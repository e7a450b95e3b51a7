"""Which images a saved view selects: its rules evaluated over plain columns (numpy for the numbers) for every image
at once — the folder's own (relative path, class folder, tags) and, for rules on the model's columns, the Folder tab's
(prediction, confidence, correct, given) from the embedding cache. The rules and their records: `views.py`."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vitstudio.core.data.images import expand_paths
from vitstudio.core.files import dataset_dir

from .views import FILE_FIELDS, MODEL_FIELDS, check_rules, model_fields, read_tags, relative, shown_rule, view_rules


def label_of(folder: str | Path, path: str | Path) -> str | None:
    """The class folder an image is in (its parent's name), None for an image directly in `folder` or outside it."""
    parent = Path(os.path.abspath(path)).parent
    top = Path(os.path.abspath(folder))
    return parent.name if parent != top and top in parent.parents else None


def file_columns(folder: str | Path, files: Sequence[str | Path]) -> dict[str, list]:
    """The columns every caller has: each file's relative path, class folder and tags (`files`: the folder's images
    now, among which a tagged file that moved is found by its content)."""
    tags = read_tags(folder, files)
    paths = [relative(folder, f) for f in files]
    return {"path": paths, "label": [label_of(folder, f) for f in files],
            "tags": [set(tags.get(p, ())) for p in paths]}


def select(rules: list[dict], columns: dict[str, Sequence]) -> np.ndarray:
    """(N,) bool: the images every rule holds for. `columns`: field -> N values (tags: N sets of names)."""
    return _evaluated(check_rules(rules), columns)


def _evaluated(rules: list[dict], columns: dict[str, Sequence]) -> np.ndarray:
    n = len(next(iter(columns.values()))) if columns else 0
    keep = np.ones(n, bool)
    for rule in rules:
        field, op, value = rule["field"], rule["op"], rule["value"]
        if field not in columns:
            raise ValueError(f"The rule on {field!r} needs a {field} column, which is not at hand here (the command "
                             f"line has {', '.join(FILE_FIELDS)} and, with a model, {', '.join(MODEL_FIELDS)}).")
        try:
            keep &= _holds(op, value, columns[field])
        except TypeError as exc:  # a value of another kind than the column's (check_rules knows the app's columns)
            raise ValueError(f"The rule {shown_rule(rule)} cannot be evaluated on the {field} column: {exc}.") from None
    return keep


def selected(rules: list[dict], columns: dict[str, Sequence]) -> np.ndarray:
    """(N,) bool: `select` of rules as `check_rules` returned them (a saved view's: not checked again, 300,000 views
    are listed at once), and, for rules on the model's columns, only the images the model read (as the Folder tab's
    rows are)."""
    keep = _evaluated(rules, columns)
    if model_fields(rules):
        keep &= np.asarray([v is not None for v in columns["prediction"]], bool)
    return keep


def _holds(op: str, value, column: Sequence) -> np.ndarray:
    if op in ("any", "all", "none"):
        wanted = set(value)
        test = {"any": lambda t: bool(t & wanted), "all": lambda t: wanted <= t, "none": lambda t: not t & wanted}[op]
        return np.fromiter((test(t) for t in column), bool, len(column))
    if op == "glob":
        return np.fromiter((fnmatch.fnmatchcase(p, value) for p in column), bool, len(column))
    if op in ("in", "not in"):
        inside = np.fromiter((v in value for v in column), bool, len(column))
        return inside if op == "in" else ~inside
    numbers = np.asarray(column, dtype=float if not isinstance(value, str) else object)
    return {">=": numbers >= value, "<=": numbers <= value, "==": numbers == value}[op]


def model_columns(loaded, folder: str | Path, files: Sequence[str | Path]) -> dict[str, list]:
    """The Folder tab's prediction, confidence, correct (1, 0, or -1 for a class folder the model does not know)
    and given (the class folder) of each file, from the embedding cache (computed there for the files it lacks);
    an unreadable file has None (no rule on these columns holds for it)."""
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.folder.results import folder_results

    names = [str(f) for f in files]
    embedding = embed_folder(loaded, names)
    try:
        while True:
            next(embedding)
    except StopIteration as stop:
        embedded = stop.value
    results = folder_results(embedded, [str(folder)])
    if not results.has_predictions:
        raise ValueError(f"{loaded.display_name} has no classes: no prediction, confidence or correct column.")
    at = {p: i for i, p in enumerate(results.paths)}
    values = {"prediction": results.predicted_labels().tolist(), "confidence": results.confidence.tolist(),
              "correct": results.correct().tolist(), "given": list(results.given)}
    return {field: [column[at[n]] if n in at else None for n in names] for field, column in values.items()}


def view_files(folder: str | Path, name: str, loaded=None) -> list[Path]:
    """The images of `folder` the saved view `name` selects now, in the folder's order. A view with rules on the
    model's columns needs `loaded` (a ValueError says so)."""
    rules = view_rules(folder, name)
    files = list(expand_paths([folder]))
    columns = file_columns(folder, files)
    needed = model_fields(rules)
    if needed and loaded is None:
        raise ValueError(f"the view {name!r} has rules on {', '.join(needed)}, which a model's predictions give: "
                         f"give --model")
    if needed:
        columns |= model_columns(loaded, folder, files)
    return [f for f, k in zip(files, selected(rules, columns)) if k]


def view_labels_file(folder: str | Path, name: str, loaded=None) -> Path:
    """The view as a labels file (`core/data/labels_file.py`: absolute path, class folder; empty outside one) in the
    app's records of the folder, for the commands that take a dataset (audit, finetune): written afresh at each use
    from the rules, so it is never a stale list."""
    import csv
    import io

    from vitstudio.core.files import atomic_write_bytes

    rows = [(os.path.abspath(f), label_of(folder, f) or "") for f in view_files(folder, name, loaded)]
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["path", "label"])
    writer.writerows(rows)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    if len(safe) > 100:  # a file name is at most 255 bytes: a long name is cut and told apart by its digest
        safe = f"{safe[:60]}-{hashlib.blake2b(name.encode('utf-8', 'surrogatepass'), digest_size=8).hexdigest()}"
    target = dataset_dir(folder) / "views" / f"{safe}.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, text.getvalue().encode("utf-8", "surrogateescape"))
    return target
