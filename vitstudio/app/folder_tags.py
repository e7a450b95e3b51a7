"""Tags and saved views in the Folder tab, Qt-free, through the core's records
(`core/folder/views.py`: kept in the app's data folder, never in the folder itself).

Tags: any names, several per image, put on the rows selected (the table's, the gallery's or the map's) and read back
with the folder's results. The Tag filter is a field of the Folder state (`tag`): reset with the other filters.
A saved view is the filters as rules (FiftyOne's rule: what matches now, not a list of files) — the predicted class,
the minimum confidence, correct or mistakes, the tag — evaluated by the core's `select` over the Folder tab's
columns. Restoring one by name sets those filters again; rules that none of them holds (a view written on the
command line: a class folder, a path pattern) go into the state's `rules` and filter as they are."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from .evented import Event, EventedModel
from .folder_states import ALL_TAGS, FILTER_DEFAULTS

if TYPE_CHECKING:
    from .folder_model import FolderModel

NO_TAGS: frozenset[str] = frozenset()
NO_FOLDER = "Tags and views are kept per folder: open one folder (not a drop of files) to tag its images."


class FolderTags(EventedModel):
    changed = Event("the tags or views changed (their names offered)")

    def __init__(self, folder_model: FolderModel) -> None:
        self.folder_model = folder_model
        self.tags: list[frozenset[str]] = []  # per row of the results: its tag names
        self.views: dict[str, list[dict]] = {}  # the folder's saved views, by name
        self._columns: dict[str, list] = {}  # the results' columns the rules read, made when first needed
        folder_model.narrowers.append(self.rows_kept)
        folder_model.results_changed.connect(self._on_results)
        folder_model.relocated.connect(self._on_results)  # moved files: their keys in the records changed

    @property
    def folder(self) -> str | None:
        return self.folder_model.folder

    def _on_results(self, results) -> None:
        from vitstudio.core.folder.views import read_tags, read_views

        self._columns = {}
        if results is None or self.folder is None:
            self.tags, self.views = [], {}
        else:
            kept = read_tags(self.folder, results.paths)  # a tagged file moved in the folder: found by content
            self.tags = [NO_TAGS] * len(results.paths) if not kept else self._tags_of(results.paths, kept)
            self.views = read_views(self.folder)
        self._offer()

    def _tags_of(self, paths, kept: dict[str, list[str]]) -> list[frozenset[str]]:
        """Each path's tags: its key in the records (`relative`) made once per folder, not per file (100k relpaths
        took ~1.5 s of the GUI thread); the untagged share one empty set (100k new sets: ~0.4 s of garbage
        collection on the GUI thread)."""
        from vitstudio.core.folder.views import relative

        parents = [os.path.split(p) for p in paths]
        keys = {d: relative(self.folder, d) for d in {d for d, _ in parents}}
        found = (kept.get(base if keys[d] == "." else f"{keys[d]}/{base}") for d, base in parents)
        return [frozenset(names) if names else NO_TAGS for names in found]

    def names(self) -> list[str]:
        return sorted(set().union(*self.tags)) if self.tags else []

    def _offer(self) -> None:
        names = tuple(self.names())
        self.folder_model.state.redeclare("tag", choices=ALL_TAGS[0] + names, labels=ALL_TAGS[1] + names)
        self.changed.emit()

    # -- tagging ---------------------------------------------------------------------------------------------------
    def tag(self, rows, name: str, remove: bool = False) -> int:
        """Put the tag `name` on these rows (or take it off); returns how many rows there were."""
        from vitstudio.core.folder.views import tag

        if self.folder is None:
            raise ValueError(NO_FOLDER)
        rows = [int(r) for r in rows]
        paths = [self.folder_model.results.paths[r] for r in rows]
        tag(self.folder, paths, add=() if remove else (name,), remove=(name,) if remove else ())
        for r in rows:
            self.tags[r] = self.tags[r] - {name} if remove else self.tags[r] | {name}
        self._columns.pop("tags", None)
        self._offer()
        if self.folder_model.state.tag == name or self.folder_model.state.rules:
            self.folder_model.apply_filters()  # what the filter holds changed
        return len(rows)

    # -- filtering ---------------------------------------------------------------------------------------------------
    def rows_kept(self) -> np.ndarray | None:
        """The rows the Tag filter and a restored view's other rules leave; None when there are neither."""
        state = self.folder_model.state
        rules = list(state.rules) + ([{"field": "tags", "op": "any", "value": [state.tag]}] if state.tag else [])
        if not rules or self.folder_model.results is None:
            return None
        from vitstudio.core.folder.view_select import select

        try:
            return np.flatnonzero(select(rules, self.columns({rule["field"] for rule in rules})))
        except ValueError as exc:  # a rule on a column the tab has not (a view written elsewhere): nothing matches
            self.folder_model.app.message.emit("warning", str(exc))
            return np.zeros(0, np.int64)

    def columns(self, fields) -> dict[str, list]:
        """The columns a view's rules can read here: the command line's (tags, label, path) and the Folder tab's
        (prediction, confidence, correct, given)."""
        from vitstudio.core.folder.view_select import label_of
        from vitstudio.core.folder.views import relative

        res, folder = self.folder_model.results, self.folder or ""
        make = {"tags": lambda: self.tags, "path": lambda: [relative(folder, p) for p in res.paths],
                "label": lambda: [label_of(folder, p) for p in res.paths],
                "prediction": lambda: res.predicted_labels().tolist(), "confidence": lambda: res.confidence,
                "correct": lambda: res.correct(), "given": lambda: list(res.given)}
        for field in fields:
            if field not in self._columns and field in make:
                self._columns[field] = make[field]()
        return {f: self._columns[f] for f in fields if f in self._columns}

    # -- views -----------------------------------------------------------------------------------------------------
    def current_rules(self) -> list[dict]:
        """The filters as a view's rules."""
        s = self.folder_model.state
        rules = [] if s.predicted is None else [{"field": "prediction", "op": "in", "value": [s.predicted]}]
        if s.min_conf > 0:
            rules.append({"field": "confidence", "op": ">=", "value": s.min_conf})
        if s.correct is not None:
            rules.append({"field": "correct", "op": "==", "value": int(s.correct)})
        if s.tag is not None:
            rules.append({"field": "tags", "op": "any", "value": [s.tag]})
        return rules + list(s.rules)

    def refresh_views(self) -> None:
        """The views saved now (the command line may have saved one since the folder opened)."""
        from vitstudio.core.folder.views import read_views

        if self.folder is not None and self.folder_model.results is not None:
            self.views = read_views(self.folder)
            self.changed.emit()

    def save_view(self, name: str) -> None:
        """The filters saved as the view `name`, with the model shown when its rules read the model's columns: the
        command line's `--view` then computes them with that model unless told another."""
        from vitstudio.core.folder.views import read_views, save_view

        if self.folder is None:
            raise ValueError(NO_FOLDER)
        save_view(self.folder, name, self.current_rules(), self.model_spec())
        self.views = read_views(self.folder)
        self.changed.emit()

    def model_spec(self) -> dict | None:
        """The model shown, as the command line's --model and --weights name it (a local path made absolute: the
        command may run elsewhere); None before any model."""
        app = self.folder_model.app
        loaded = app.model
        if loaded is None:
            return None
        request = app.view.requested
        weights = request.weights if request is not None and request.spec == loaded.name else None
        spec = os.path.abspath(loaded.name) if os.path.exists(loaded.name) else loaded.name
        return {"model": spec, "weights": os.path.abspath(weights) if weights else None}

    def restore_view(self, name: str) -> None:
        """The view's rules as the filters: each a filter field where one holds it, the rest as `rules`."""
        state = self.folder_model.state
        fields, rest = {**FILTER_DEFAULTS, "follow_map": state.follow_map}, []
        for rule in self.views[name]:
            field, op, value = rule["field"], rule["op"], rule["value"]
            if field == "prediction" and op == "in" and len(value) == 1 and value[0] in state.fields()[
                    "predicted"].choices and fields["predicted"] is None:
                fields["predicted"] = value[0]
            elif field == "confidence" and op == ">=" and not fields["min_conf"] and 0 <= value <= 1:
                fields["min_conf"] = float(value)
            elif field == "correct" and op == "==" and value in (0, 1) and fields["correct"] is None:
                fields["correct"] = bool(value)
            elif field == "tags" and op == "any" and len(value) == 1 and fields["tag"] is None:
                fields["tag"] = value[0]
            else:
                rest.append(rule)
        fields["rules"] = tuple(rest)
        self._offer_tag(fields["tag"])
        state.update(**fields)

    def _offer_tag(self, name: str | None) -> None:
        """A view may filter by a tag no image carries now: offered all the same (it selects nothing)."""
        choices = self.folder_model.state.fields()["tag"].choices
        if name is not None and name not in choices:
            names = tuple(sorted({*self.names(), name}))
            self.folder_model.state.redeclare("tag", choices=ALL_TAGS[0] + names, labels=ALL_TAGS[1] + names)
