"""What the window remembers between sessions, in the app's data folder (`core.files.SettingsStore`, JSON written
atomically): the Training form (preset, every setting, the Advanced switch, the base model) and its dataset, the
Folder tab's folder and, per folder, its filters. The label review's exclusions are remembered per dataset by the
Folder tab itself (`folder/file_operations.py`); a restored Training dataset gets them back too.

Written shortly after each change (one write per burst of edits, and at close); read once, when the window is
built. A folder opened before any model is loaded waits for the first model (the Folder tab's own rule)."""

from __future__ import annotations

import logging
import os

from PySide6.QtCore import QEvent, QObject, QTimer

from vitstudio.core.files import SettingsStore, dataset_key
from vitstudio.core.folder.exclusions import read_exclusions

log = logging.getLogger("vitstudio.gui")
# the Folder tab's filters kept per folder. Not "Table follows map box": the box is not kept (the map is made
# again), and the toggle restored alone would filter the table by a box the user never drew
FILTERS = ("predicted", "min_conf", "correct")


class SessionMemory(QObject):
    def __init__(self, window, store: SettingsStore | None = None) -> None:
        super().__init__(window)
        self.window, self.training, self.panel = window, window.training, window.folder
        self.store = store or SettingsStore()
        self._pending: dict = {}
        self._flush_timer = QTimer(self, singleShot=True, interval=300, timeout=self.flush)
        self._filters_of: str | None = None  # the folder whose filters the panel's state holds now
        self._filters_waiting: dict | None = None  # a reopened folder's filters, set once its results are in
        self.restore()
        self.training.form.changed.connect(self._remember_form)
        self.training.view_state.events.base_model.connect(self._remember_form)
        self.training.view_state.events.dataset.connect(self._remember_dataset)  # the dataset chosen
        self.panel.view_state.connect(self._on_folder_state)
        self.panel.model.modelReset.connect(self._on_folder_table)
        window.installEventFilter(self)

    # -- restoring --------------------------------------------------------------------------------------------
    def restore(self) -> None:
        try:
            self._restore_form(self.store.get("training_form") or {})
        except (TypeError, ValueError, KeyError) as exc:  # written by another version: start from the preset
            log.warning("the remembered Training form could not be restored: %s", exc)
        dataset = self.store.get("training_dataset")
        if isinstance(dataset, str) and os.path.exists(dataset):  # a folder, or a labels file (the Labels tab)
            self.training.set_dataset(dataset, exclude=read_exclusions(dataset))
        folder = self.store.get("folder")
        if isinstance(folder, str) and os.path.isdir(folder):
            self.panel.open_paths([folder])  # opens now, or when the first model has loaded

    def _restore_form(self, saved: dict) -> None:
        form = self.training.form
        if saved.get("preset") and form.preset.findText(saved["preset"]) >= 0:
            form.state.preset = saved["preset"]
        for name, value in (saved.get("values") or {}).items():
            if name in form.controls and name != "preset":
                try:
                    form.state.update(**{name: value})
                except (TypeError, ValueError) as exc:  # another version's range or type: that one stays the preset's
                    log.warning("the remembered %s was not restored: %s", name, exc)
        form.state.advanced = bool(saved.get("advanced"))
        if isinstance(saved.get("base_model"), str) and saved["base_model"]:
            self.training.view_state.base_model = saved["base_model"]

    # -- remembering ------------------------------------------------------------------------------------------
    def _remember(self, key: str, value) -> None:
        self._pending[key] = value
        self._flush_timer.start()

    def flush(self) -> None:
        pending, self._pending = self._pending, {}
        try:
            for key, value in pending.items():
                self.store.set(key, value)
        except OSError as exc:  # a full or read-only disk must not stop the app; the next change tries again
            log.warning("could not remember the settings in %s: %s", self.store.path, exc)

    def _remember_form(self, *_changed) -> None:
        form = self.training.form  # (the state keeps a setting's last good value while it is typed wrongly)
        values = {name: list(v) if isinstance(v, tuple) else v
                  for name in form.controls for v in [getattr(form.state, name)]}
        self._remember("training_form", {"preset": form.state.preset, "values": values,
                                         "advanced": form.state.advanced,
                                         "base_model": self.training.view_state.base_model or ""})

    def _remember_dataset(self, dataset: str | None) -> None:
        self._remember("training_dataset", dataset or "")

    def _on_folder_state(self, name: str, value) -> None:
        folder = self.panel.folder
        if name == "paths":
            self._remember("folder", folder or "")
            self._filters_of = folder
            saved = (self.store.get("folder_filters") or {}).get(dataset_key(folder)) if folder else None
            self._filters_waiting = saved if isinstance(saved, dict) else None
        elif name in FILTERS and folder and folder == self._filters_of and self._filters_waiting is None:
            filters = dict(self._pending.get("folder_filters") or self.store.get("folder_filters") or {})
            filters[dataset_key(folder)] = {f: getattr(self.panel.view_state, f) for f in FILTERS}
            self._remember("folder_filters", filters)

    def _on_folder_table(self) -> None:
        if self._filters_waiting is not None and self.panel.results is not None:
            QTimer.singleShot(0, self._restore_filters)  # after the panel has filled its class list

    def _restore_filters(self) -> None:
        saved, self._filters_waiting = self._filters_waiting, None
        if not saved or self.panel.results is None:
            return
        if saved.get("predicted") is not None and self.panel.predicted.findData(saved["predicted"]) < 0:
            saved = {**saved, "predicted": None}  # a class these results no longer have
        known = {f: saved[f] for f in FILTERS if f in saved and hasattr(self.panel.view_state, f)}
        try:
            self.panel.view_state.update(**known)
        except (AttributeError, TypeError, ValueError) as exc:
            log.warning("remembered filters of %s not restored: %s", self.panel.folder, exc)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.window and event.type() == QEvent.Close:
            self.flush()
        return False
