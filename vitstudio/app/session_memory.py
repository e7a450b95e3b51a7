"""What the app remembers between sessions, Qt-free, as declared groups of state fields (never a widget's value):
the Training form (its preset, every setting, the Advanced switch) with the base model, the Training dataset, the
Folder tab's folder and, per folder, its filters. Kept in the app's data folder (`core.records.SettingsStore`, JSON
written atomically), written shortly after each change (`schedule(flush)`: the face's timer, one write per burst of
edits; by default at once) and at close; read once, at start. The label review's exclusions are remembered per
dataset by the core (`core/folder/exclusions.py`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from vitstudio.core.files import dataset_key
from vitstudio.core.records import SettingsStore

from .evented import ViewState

log = logging.getLogger("vitstudio.app")
# the Folder tab's filters kept per folder. Not "follow the map's box": the box is not kept (the map is made again),
# and the toggle restored alone would filter the table by a box the user never drew
FOLDER_FILTERS = ("predicted", "min_conf", "correct")
FORM_SWITCHES = ("preset", "advanced")  # the form's own fields; the rest of its fields are the run's settings


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def restore_fields(state: ViewState, saved: dict, what: str) -> None:
    """Each saved field back into `state`, one at a time: a value another version wrote (a range, a type, a name
    this version lacks) leaves that field as it is, and the others are restored."""
    fields = state.fields()
    for name, value in saved.items():
        if name not in fields:
            continue
        try:
            state.update(**{name: value})
        except (TypeError, ValueError) as exc:
            log.warning("the remembered %s %s was not restored: %s", what, name, exc)


class SessionMemory:
    def __init__(self, store: SettingsStore, form: ViewState, training: ViewState, folder_model,
                 open_dataset: Callable[[str], None], schedule: Callable[[Callable[[], None]], None] | None = None):
        """`form`: the Training form's state; `training`: the Training tab's (base model, dataset);
        `open_dataset(path)`: the face opens a remembered Training dataset (it scans it)."""
        self.store, self.form, self.training, self.folder = store, form, training, folder_model
        self.open_dataset = open_dataset
        self.schedule = schedule or (lambda flush: flush())
        self.pending: dict = {}
        self.filters_of: str | None = None  # the folder whose filters the Folder state holds now
        self.filters_waiting: dict | None = None  # a reopened folder's filters, set once its results are in

    def follow(self) -> None:
        """Restore what was remembered, then remember every change from now on."""
        self.restore()
        self.form.connect(self._remember_form)
        self.training.events.base_model.connect(self._remember_form)
        self.training.events.dataset.connect(lambda dataset: self._remember("training_dataset", dataset or ""))
        self.folder.state.connect(self._on_folder_state)
        self.folder.results_changed.connect(self._on_results)

    # -- restoring --------------------------------------------------------------------------------------------
    def restore(self) -> None:
        saved = self.store.get("training_form")
        if isinstance(saved, dict):
            if saved.get("preset"):
                restore_fields(self.form, {"preset": saved["preset"]}, "preset")  # first: it sets every setting
            values = saved.get("values")
            settings = {k: v for k, v in values.items() if k not in FORM_SWITCHES} if isinstance(values, dict) else {}
            restore_fields(self.form, {**settings, "advanced": bool(saved.get("advanced"))}, "setting")
            if isinstance(saved.get("base_model"), str) and saved["base_model"]:
                restore_fields(self.training, {"base_model": saved["base_model"]}, "base model")
        dataset = self.store.get("training_dataset")
        if isinstance(dataset, str) and os.path.exists(dataset):  # a folder, or a labels file (the Labels tab)
            self.open_dataset(dataset)
        folder = self.store.get("folder")
        if isinstance(folder, str) and os.path.isdir(folder):
            self.folder.open_paths([folder])  # opens now, or when the first model has loaded

    def _on_results(self, results) -> None:
        saved, self.filters_waiting = self.filters_waiting, None
        if results is None or not saved:
            self.filters_waiting = saved if results is None else None
            return
        if saved.get("predicted") not in self.folder.state.fields()["predicted"].choices:
            saved = {**saved, "predicted": None}  # a class these results no longer have
        restore_fields(self.folder.state, {f: saved[f] for f in FOLDER_FILTERS if f in saved}, "filter")

    # -- remembering ------------------------------------------------------------------------------------------
    def _remember(self, key: str, value) -> None:
        self.pending[key] = value
        self.schedule(self.flush)

    def flush(self) -> None:
        pending, self.pending = self.pending, {}
        try:
            for key, value in pending.items():
                self.store.set(key, value)
        except OSError as exc:  # a full or read-only disk must not stop the app; the next change tries again
            log.warning("could not remember the settings in %s: %s", self.store.path, exc)

    def _remember_form(self, *_changed) -> None:
        form = self.form  # (the state keeps a setting's last good value while it is typed wrongly)
        values = {name: _plain(getattr(form, name)) for name in form.fields() if name not in FORM_SWITCHES}
        self._remember("training_form", {"preset": form.preset, "values": values, "advanced": form.advanced,
                                         "base_model": self.training.base_model or ""})

    def _on_folder_state(self, name: str, _value) -> None:
        folder = self.folder.folder
        if name == "paths":
            self._remember("folder", folder or "")
            self.filters_of = folder
            saved = (self.store.get("folder_filters") or {}).get(dataset_key(folder)) if folder else None
            self.filters_waiting = saved if isinstance(saved, dict) else None
        elif name in FOLDER_FILTERS and folder and folder == self.filters_of and self.filters_waiting is None:
            filters = dict(self.pending.get("folder_filters") or self.store.get("folder_filters") or {})
            filters[dataset_key(folder)] = {f: getattr(self.folder.state, f) for f in FOLDER_FILTERS}
            self._remember("folder_filters", filters)
