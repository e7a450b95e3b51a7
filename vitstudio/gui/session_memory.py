"""The window's side of what is remembered between sessions (vitstudio/app/session_memory.py declares it, as groups
of state fields): a timer that writes once per burst of edits, a write at close, and the Training tab opening a
remembered dataset (with the label review's exclusions, kept per dataset)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QTimer

from vitstudio.app.folder_files import read_exclusions
from vitstudio.app.session_memory import SessionMemory as RememberedFields
from vitstudio.core.records import SettingsStore


class WindowMemory(QObject):
    def __init__(self, window, store: SettingsStore | None = None) -> None:
        super().__init__(window)
        self.window, self.training = window, window.training
        self._flush_timer = QTimer(self, singleShot=True, interval=300)
        self.fields = RememberedFields(store or SettingsStore(), window.training.form.state,
                                       window.training.view_state, window.folder.folder_model,
                                       open_dataset=self._open_dataset, schedule=self._schedule)
        self.store = self.fields.store
        self._flush_timer.timeout.connect(self.fields.flush)
        self.fields.follow()
        window.installEventFilter(self)

    def _schedule(self, _flush) -> None:
        self._flush_timer.start()  # one write per burst of edits

    def flush(self) -> None:
        self.fields.flush()

    def _open_dataset(self, dataset: str) -> None:
        self.training.set_dataset(dataset, exclude=read_exclusions(dataset))

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.window and event.type() == QEvent.Close:
            self.flush()
        return False
