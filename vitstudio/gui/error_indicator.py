"""Errors without interruptions: a button in the status bar counts the errors since it was last opened; a click
shows the latest one with its details (the traceback) in a box that does not block the window, and the log.
Nothing pops up by itself: a failed thumbnail must not steal the focus from a form being typed in. Questions the
user must answer (overwrite? move?) stay dialogs, where the code asks them."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMessageBox, QToolButton

from vitstudio.core.files import counted


class ErrorIndicatorWidget(QToolButton):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.notices: list = []  # every error of the session, oldest first
        self.unseen = 0
        self.box: QMessageBox | None = None
        self.setAutoRaise(True)
        self.setStyleSheet("color: #b00020; font-weight: bold;")
        self.clicked.connect(self.show_latest)
        self.setVisible(False)

    def add(self, notice) -> None:
        """A Notice (message + details on demand), counted and offered; the caller has logged it."""
        self.notices.append(notice)
        self.unseen += 1
        total = len(self.notices)  # "2 errors" after 3 read as a miscount: the first was seen already
        self.setText(f"⚠ {counted(self.unseen, 'error')}: details…" if total == self.unseen else
                     f"⚠ {self.unseen} new ({counted(total, 'error')} in all): details…")
        self.setToolTip(f"{notice.message}\n(click for the details)")
        self.setVisible(True)

    def show_latest(self) -> QMessageBox | None:
        """The latest error in a non-modal box ("Show Details…" holds the traceback); the log dock shown too."""
        if not self.notices:
            return None
        notice = self.notices[-1]
        box = QMessageBox(QMessageBox.Warning, "ViT Studio", notice.message, QMessageBox.Ok, self.window)
        box.setInformativeText(f"{len(self.notices)} errors this session; all of them are in the log."
                               if len(self.notices) > 1 else "")
        box.setDetailedText(notice.details)
        box.setModal(False)
        box.setAttribute(Qt.WA_DeleteOnClose)
        box.show()
        self.box = box
        log_dock = self.window.findChild(QDockWidget, "log_dock")
        if log_dock is not None:
            log_dock.show()
            log_dock.raise_()
            # the newest line in sight: lines added while the Log was a hidden tab left it scrolled above them (the
            # walk); its size is known once the tab is laid out, hence again after the event loop's turn
            self._scroll_log_to_end()
            QTimer.singleShot(0, self._scroll_log_to_end)
        self.unseen = 0
        self.setVisible(False)
        return box

    def _scroll_log_to_end(self) -> None:
        view = getattr(self.window, "log_view", None)
        if view is not None:
            view.verticalScrollBar().setValue(view.verticalScrollBar().maximum())
