"""Tags and saved views of a folder, kept in the app's records of the dataset (`files.dataset_dir`: the data
folder, keyed by the folder's resolved path), never in the folder itself.

Tags: any names, several per image, of the folder's own images, keyed by the image's path relative to the folder
and by its content (a file moved inside the folder keeps them; `read_tags`). A saved view is a list of
filter rules, not a list of files (as a FiftyOne saved view is its stages): reopened later it selects what matches
*now* — a new image tagged `keep` joins the view `keep`. Every rule must hold (AND):

    {"field": "tags", "op": "any" | "all" | "none", "value": [names]}   the image's tags
    {"field": "label", "op": "in" | "not in", "value": [names]}          its class folder (None outside one)
    {"field": "path", "op": "glob", "value": "cats/*.jpg"}               its path relative to the folder (fnmatch)
    {"field": F, "op": ">=" | "<=" | "==" | "in" | "not in", "value": v} any other column the caller gives
                                                                         (the Folder tab's prediction, confidence,
                                                                          correct, given: MODEL_FIELDS)

The model's columns are what the Folder tab shows (`results.folder_results` on the folder's embeddings), computed
where a view needs them through the embedding cache (`model_columns`): no forward for a file any folder command or
the tab has seen with that model. A view saved on the Folder tab records that model (`saved_model`): the command
line computes its columns with it unless given another.

`view_select.select(rules, columns)` evaluates the rules over plain columns (numpy for the numbers) for every image,
so the command line and the app's Folder model share one rule engine. Torch-free.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from vitstudio.core.files import data_dir, dataset_dir
from vitstudio.core.records import read_json_file, records_log, set_aside, write_json_file

try:
    import fcntl
except ImportError:  # Windows: no flock; the thread lock alone (one process at a time is the user's business)
    fcntl = None


class UnknownView(ValueError):
    """No view of that name is saved for the folder; the message lists the saved ones."""


FILE_FIELDS = ("tags", "label", "path")  # the columns `file_columns` gives, from the folder and its records
MODEL_FIELDS = ("prediction", "confidence", "correct", "given")  # the Folder tab's columns from a model's outputs
OPS = {"tags": ("any", "all", "none"), "label": ("in", "not in"), "path": ("glob",)}
COLUMN_OPS = (">=", "<=", "==", "in", "not in")


def _tags_path(folder) -> Path:
    return dataset_dir(folder) / "tags.json"


def _views_path(folder) -> Path:
    return dataset_dir(folder) / "views.json"


def relative(folder: str | Path, path: str | Path) -> str:
    """The image's key in the records: its path relative to the folder, with '/' (absolute when outside it)."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(folder))
    return os.path.abspath(path) if rel.startswith("..") else Path(rel).as_posix()


# -- tags -------------------------------------------------------------------------------------------------------------
# tags.json: {"tags": {relative path: [names]}, "content": {relative path: [size, digest]}, "searched": listing}.
# "tags" alone is what the first version wrote and read (it reads this file still); "content" is each tagged file's
# size and `keyedstore.content_digest` (what the folder caches key a file by), so a file moved or renamed inside the
# folder by anything (a label-review move, `sort --move`, the file manager) is found again by its bytes when the
# folder is read; "searched" is the listing a search for the tagged files that are gone last failed on.
def read_tags(folder: str | Path, files: Sequence[str | Path] | None = None) -> dict[str, list[str]]:
    """{relative path: sorted tag names} of the images that have any. With `files` (the folder's images now), a
    tagged file that is gone is looked for among them by its content (moved: its tags move to its new path) and
    each tagged file without a recorded digest gets one (records of the first version, migrated), written back."""
    if not _tags_path(folder).is_file():
        return {}  # a folder never tagged: nothing to lock or read
    with records_locked():
        tags, content, searched = _read_records(folder)
        if files is not None:
            changed, searched = _follow_content(folder, tags, content, files, searched)
            if changed:
                _write_records(folder, tags, content, searched)
    return {k: sorted(v) for k, v in sorted(tags.items())}


def tag(folder: str | Path, paths: Sequence[str | Path], add: Sequence[str] = (), remove: Sequence[str] = ()
        ) -> dict[str, list[str]]:
    """Add and remove tag names on images of `folder`; returns the tags after (written at once, atomically, under
    the records' lock). A file outside `folder` is refused (ValueError, nothing written): tags are the folder's."""
    for name in (*add, *remove):
        check_name(name, "tag")
    keys = [relative(folder, path) for path in paths]
    outside = [str(p) for p, k in zip(paths, keys) if os.path.isabs(k)]
    if outside:
        more = f" (and {len(outside) - 1} more)" if outside[1:] else ""
        raise ValueError(f"{outside[0]}{more} is not inside {folder}: tags are kept per folder, for its own images")
    with records_locked():
        tags, content, searched = _read_records(folder)
        for path, key in zip(paths, keys):
            names = (tags.get(key, set()) | set(add)) - set(remove)
            if names:
                tags[key] = names
                content[key] = _content_of(path) or content.get(key)
            else:
                tags.pop(key, None)
        _write_records(folder, tags, content, searched)
    return {k: sorted(v) for k, v in sorted(tags.items())}


def _record(path: Path, objects: tuple[str, ...]) -> dict:
    """A records file (tags.json, views.json) read whole: {} when missing; a file that is no JSON object, or whose
    `objects` are not JSON objects (`{"views": []}`), set aside as `.bad` with a warning (`records.set_aside`)."""
    data = read_json_file(path)
    wrong = next((k for k in objects if not isinstance(data.get(k, {}), dict)), None)
    if wrong is not None:
        set_aside(path, f"{path} holds {wrong!r} as a JSON {type(data[wrong]).__name__}, not an object")
        return {}
    return data


def _read_records(folder) -> tuple[dict[str, set[str]], dict[str, list], str | None]:
    data = _record(_tags_path(folder), ("tags", "content"))
    tags = {k: {str(t) for t in v} for k, v in data.get("tags", {}).items() if isinstance(v, list) and v}
    content = {k: v for k, v in data.get("content", {}).items()
               if k in tags and isinstance(v, list) and len(v) == 2 and isinstance(v[1], str)}
    return tags, content, data.get("searched") if isinstance(data.get("searched"), str) else None


def _write_records(folder, tags: dict[str, set[str]], content: dict[str, list], searched: str | None) -> None:
    record = {"dataset": str(Path(folder).resolve()), "tags": {k: sorted(v) for k, v in sorted(tags.items())},
              "content": {k: content[k] for k in sorted(tags) if content.get(k)}}
    if searched:
        record["searched"] = searched
    write_json_file(_tags_path(folder), record)


def _content_of(path) -> list | None:
    """[size, digest] of a file as the folder caches key it; None when it cannot be read."""
    from vitstudio.core.folder.keyedstore import content_digest

    try:
        return [os.stat(path).st_size, content_digest(path)]
    except OSError:
        return None


def _follow_content(folder, tags: dict[str, set[str]], content: dict[str, list], files, searched: str | None
                    ) -> tuple[bool, str | None]:
    """Re-key the tags of files that are gone to the file of `files` with the same bytes; digest the tagged files
    that have none. Returns (whether the records changed, the listing a search failed on: None when none did)."""
    top = os.path.abspath(folder)
    here = {k for k in tags if os.path.isfile(os.path.join(top, k))}
    changed = False
    for key in here - set(content):
        content[key] = _content_of(os.path.join(top, key))
        changed = changed or content[key] is not None
    gone = {k: content[k] for k in tags if k not in here and content.get(k)}
    if not gone:
        return changed or searched is not None, None
    names = [str(f) for f in files]
    listing = hashlib.blake2b(os.fsencode("\n".join(names)), digest_size=16).hexdigest()
    if listing == searched:  # nothing came or went since the last search: the files are still gone
        return changed, searched
    by_content = {tuple(v): k for k, v in gone.items()}
    sizes = {size for size, _ in by_content}
    bases = {os.path.basename(k) for k in gone}  # a move keeps the name: those first, the rest stat'ed for size
    for name in dict.fromkeys([*(n for n in names if os.path.basename(n) in bases), *names]):
        try:
            size = os.stat(name).st_size
        except OSError:
            continue
        if size not in sizes or (key := relative(folder, name)) in tags or os.path.isabs(key):
            continue
        found = _content_of(name)
        old = by_content.pop(tuple(found), None) if found else None
        if old is not None:
            tags[key], content[key] = tags.pop(old), content.pop(old)
            sizes = {s for s, _ in by_content}
            if not by_content:
                break
    return True, listing if by_content else None


def carry_tags(moves: dict[str, str], out: str | Path | None = None) -> int:
    """Tags follow the files a move (or its undo) relocated, {old path: new path}: a file's tags leave the records
    of the folder that holds them (the nearest folder above it with tag records and an entry for it) for the
    records of the same folder when the new place is inside it, else of the nearest folder above the new place with
    tag records, else of `out` (a sort's output folder). Returns how many files' tags moved."""
    records: dict[str, tuple[dict[str, set[str]], dict[str, list], str | None]] = {}
    has_records: dict[str, bool] = {}
    changed: set[str] = set()

    def holders(path: str):  # the folders above `path` that keep tag records, nearest first
        for folder in Path(os.path.abspath(path)).parents:
            key = str(folder)
            if key not in has_records:
                has_records[key] = _tags_path(folder).is_file()
            if has_records[key]:
                yield key

    def tags_of(folder: str) -> dict[str, set[str]]:
        if folder not in records:
            records[folder] = _read_records(folder)
        return records[folder][0]

    carried = 0
    with records_locked():
        for old, new in moves.items():
            home = next((f for f in holders(old) if relative(f, old) in tags_of(f)), None)
            if home is None:
                continue
            inside = not os.path.isabs(relative(home, new))  # relative() is absolute outside the folder
            there = home if inside else next(holders(new), None) or (os.path.abspath(out) if out else None)
            if there is None:
                continue
            names = tags_of(home).pop(relative(home, old))
            digest = records[home][1].pop(relative(home, old), None)
            tags_of(there).setdefault(relative(there, new), set()).update(names)
            if digest:
                records[there][1][relative(there, new)] = digest
            changed |= {home, there}
            carried += 1
        for folder in changed:
            _write_records(folder, *records[folder])
    return carried


@contextlib.contextmanager
def records_locked():
    """Every read-modify-write of the tags and views records runs under one lock (an `flock` on a file beside the
    records, and a lock between this process's threads): two writers at once, two processes or the window and a
    command, each see the other's change instead of writing over it. Re-entrant within a thread."""
    with _THREAD_LOCK:
        _HELD[0] += 1
        try:
            if _HELD[0] == 1 and fcntl is not None:
                lock = data_dir() / "datasets" / "records.lock"
                lock.parent.mkdir(parents=True, exist_ok=True)
                _HELD[1] = open(lock, "a+b")  # noqa: SIM115 (closed when the outermost hold ends)
                fcntl.flock(_HELD[1].fileno(), fcntl.LOCK_EX)
            yield
        finally:
            _HELD[0] -= 1
            if _HELD[0] == 0 and _HELD[1] is not None:
                _HELD[1].close()  # closing the file releases its flock
                _HELD[1] = None


_THREAD_LOCK = threading.RLock()
_HELD: list = [0, None]  # how deep this process holds the records' lock, and the locked file


NAME_LIMIT = 200  # characters of a tag or view name (a view's labels file is named after it)


def check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not name.strip() or name != name.strip() or "," in name:
        raise ValueError(f"A {what} name is a non-empty word or phrase without commas or surrounding spaces, not "
                         f"{name!r}.")
    if len(name) > NAME_LIMIT:
        raise ValueError(f"A {what} name is at most {NAME_LIMIT} characters, not {len(name):,} "
                         f"({name[:40]!r}…).")


# -- views ------------------------------------------------------------------------------------------------------------
def read_views(folder: str | Path) -> dict[str, list[dict]]:
    """{name: rules} of the views saved for `folder`; one that does not read as rules is left out, with a warning
    (and kept in the file: `_views_record`)."""
    out = {}
    for name, rules in _record(_views_path(folder), ("views", "models")).get("views", {}).items():
        try:
            out[name] = check_rules(rules)
        except ValueError as exc:
            said = (str(Path(folder).resolve()), name, str(exc))
            if said not in _SAID:  # once per process: the window reads the views at every refresh
                _SAID.add(said)
                records_log.warning("the view %s saved for %s is left out: %s", shown_rule(name), folder, exc)
    return dict(sorted(out.items()))


_SAID: set[tuple[str, str, str]] = set()


def view_rules(folder: str | Path, name: str) -> list[dict]:
    """The rules of the view `name` saved for `folder`: UnknownView (naming the saved ones) when there is none, a
    ValueError saying why when its record no longer reads as rules."""
    saved = _record(_views_path(folder), ("views", "models")).get("views", {})
    if name not in saved:
        known = ", ".join(shown_rule(n) for n in sorted(saved)[:20]) + (" …" if len(saved) > 20 else "") or "none yet"
        raise UnknownView(f"No view named {shown_rule(name)} is saved for {folder} (saved: {known}).")
    try:
        return check_rules(saved[name])
    except ValueError as exc:
        raise ValueError(f"the view {shown_rule(name)} saved for {folder} cannot be used: {exc}") from None


def save_view(folder: str | Path, name: str, rules: list[dict], model: dict | None = None) -> None:
    """Save the view `name`; `model` ({"model": spec, "weights": file or None}, as `--model`/`--weights` take them):
    the model whose predictions its rules on the model's columns were written against (the Folder tab saves it),
    which the command line's `--view` uses when it is given no --model (`saved_model`)."""
    check_name(name, "view")
    with records_locked():
        record = _views_record(folder)
        record["views"][name] = check_rules(rules)
        record["models"].pop(name, None)
        if model is not None and model_fields(rules):
            record["models"][name] = {"model": str(model["model"]), "weights": model.get("weights") or None}
        write_json_file(_views_path(folder), record)


def delete_view(folder: str | Path, name: str) -> None:
    with records_locked():
        record = _views_record(folder)
        if name not in record["views"]:
            raise UnknownView(f"No view named {shown_rule(name)} is saved for {folder}.")
        del record["views"][name]
        record["models"].pop(name, None)
        write_json_file(_views_path(folder), record)


def saved_model(folder: str | Path, name: str) -> tuple[str, str | None] | None:
    """(spec, weights or None) of the model the view `name` was saved with, or None (saved on the command line, or
    by a version that did not record it)."""
    return saved_models(folder).get(name)


def saved_models(folder: str | Path) -> dict[str, tuple[str, str | None]]:
    """{view name: (spec, weights or None)} of every view saved with its model (`saved_model`), read once."""
    out = {}
    for name, kept in _record(_views_path(folder), ("views", "models")).get("models", {}).items():
        weights = kept.get("weights") if isinstance(kept, dict) else None
        if isinstance(kept, dict) and isinstance(kept.get("model"), str) and kept["model"].strip() and \
                "\0" not in kept["model"] + (weights if isinstance(weights, str) else ""):  # no path holds a NUL
            out[name] = kept["model"], weights if isinstance(weights, str) and weights else None
    return out


def _views_record(folder) -> dict:
    """views.json as written: {"dataset", "views": {name: rules}, "models": {name: model}} ("models" is beside the
    rules, so a version that knows only "views" reads the file as before)."""
    record = _record(_views_path(folder), ("views", "models"))
    return {"dataset": str(Path(folder).resolve()), "views": dict(record.get("views", {})),  # unreadable ones kept
            "models": {k: v for k, v in record.get("models", {}).items() if isinstance(v, dict)}}


NUMBER_FIELDS = ("confidence", "correct")  # the model's columns of numbers; prediction and given are class names


def check_rules(rules) -> list[dict]:
    """The rules as plain dicts, or a ValueError saying which one is not a rule: its value must be of its field's
    kind (names for tags, label, prediction and given; a number for confidence and correct; a text for a glob)."""
    if not isinstance(rules, list):
        raise ValueError("A view's rules are a list.")
    out = []
    for rule in rules:
        if not isinstance(rule, dict) or set(rule) != {"field", "op", "value"} or not isinstance(rule["field"], str):
            raise ValueError(f"A rule is {{'field', 'op', 'value'}}, not {shown_rule(rule)}.")
        allowed = OPS.get(rule["field"], COLUMN_OPS)
        if not isinstance(rule["op"], str) or rule["op"] not in allowed:
            raise ValueError(f"A rule on {rule['field']} takes {', '.join(allowed)}, not {shown_rule(rule['op'])}.")
        listed = rule["op"] in ("any", "all", "none", "in", "not in")
        if listed != isinstance(rule["value"], list):
            raise ValueError(f"The rule {shown_rule(rule)} takes {'a list' if listed else 'one value'}.")
        kind = _value_kind(rule["field"], rule["op"])
        wrong = next((v for v in (rule["value"] if listed else [rule["value"]]) if not _of_kind(v, kind)), _FITS)
        if wrong is not _FITS:
            raise ValueError(f"The rule {shown_rule(rule)} compares {rule['field']} with {shown_rule(wrong)}, which "
                             f"is not {kind}.")
        out.append({"field": rule["field"], "op": rule["op"], "value": rule["value"]})
    return out


_FITS = object()


def _value_kind(field: str, op: str) -> str:
    if field in NUMBER_FIELDS:
        return "a number"
    if op == "glob":
        return "a text"
    if field in ("tags", "label", "prediction", "given"):
        return "a name"
    return "a number or a text" if op in (">=", "<=") else "a text, a number or true/false"


def _of_kind(value, kind: str) -> bool:
    if isinstance(value, str):
        return kind != "a number"
    if kind in ("a text", "a name"):
        return kind == "a name" and value is None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number or (kind == "a text, a number or true/false" and (isinstance(value, bool) or value is None))


def shown_rule(value) -> str:
    """A value from a record as a short one-line text for a message (a record may hold anything, at any length)."""
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def model_fields(rules: list[dict]) -> list[str]:
    """The model's columns (MODEL_FIELDS) the rules read, in their order."""
    return list(dict.fromkeys(r["field"] for r in rules if r["field"] in MODEL_FIELDS))
