"""Messages in the status bar. A passing one (`PassingMessages`) is elided to the room left of the permanent widgets
(QStatusBar clips it at their edge without a sign: a long error read as cut off), between words or path parts (never
inside a word), again when that room has changed (the jobs label grows as jobs start), the whole text in the
tooltip.
What the user must not miss, kept where they look: a line in the status bar with a link to the file or folder it
is about and a × to dismiss it, until they do or another notice takes its place. Not modal, never clipped (elided
to the room there is, the whole text in its tooltip). Used for the previous session's crash (with its log) and for
finished exports (with their folder, and the seed format's note on its transform)."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFontMetrics, QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QStatusBar, QToolButton, QWidget


def elided_at_words(text: str, metrics: QFontMetrics, width: int) -> str:
    """`text` within `width` pixels, elided in the middle between words: whole words (or parts of a path, cut after
    a '/') from the start and from the end, alternately while they fit, joined by '…'. Only a first word wider
    than the room is cut inside (Qt's middle elision)."""
    if metrics.horizontalAdvance(text) <= width:
        return text
    parts = re.split(r"(?<= )|(?<=/)(?=\w)", text)  # each word, or a path's part, with the space or slash after it

    def joined(head: int, tail: int) -> str:
        start, end = "".join(parts[:head]), "".join(parts[tail:])
        return start + "…" + (" " if start.endswith(" ") and end else "") + end.lstrip()

    head, tail, stuck = 0, len(parts), set()
    while head < tail and len(stuck) < 2:
        side = "head" if "head" not in stuck and (head <= len(parts) - tail or "tail" in stuck) else "tail"
        step = (head + 1, tail) if side == "head" else (head, tail - 1)
        if step[0] <= step[1] and metrics.horizontalAdvance(joined(*step)) <= width:
            head, tail = step
        else:
            stuck.add(side)
    if head == 0:
        return metrics.elidedText(text, Qt.ElideMiddle, width)
    return joined(head, tail)


class PassingMessages:
    """`show(text)`: `text` in `status_bar` for a while, elided in the middle between words to fit beside
    `permanent` (the widgets added with addPermanentWidget, which QStatusBar draws over the message's end);
    `refit()` elides it again when they have grown or shrunk since (the window calls it as it updates them)."""

    # QStatusBar's message rect starts 6 px in and keeps 2 px from a permanent widget; spacing; and a gap of 16 px,
    # so the message's last word does not run into "cpu · fp32 · RAM…"
    MARGINS = 40

    def __init__(self, status_bar: QStatusBar, permanent: list[QWidget]) -> None:
        self.status_bar, self.permanent = status_bar, permanent
        self.text = ""  # the whole of the latest message
        self._shown, self._until, self._room = "", 0.0, 0  # what the bar shows of it, until when, in what room

    def room(self) -> int:
        """Width the message gets: the status bar's less the permanent widgets shown (by their size hints: one just
        made visible has no place in the layout yet)."""
        taken = sum(w.sizeHint().width() + 4 for w in self.permanent if not w.isHidden())
        return max(40, self.status_bar.width() - taken - self.MARGINS)

    def show(self, text: str, timeout: int = 8000) -> None:
        self.text, self._until = text, time.monotonic() + timeout / 1000 if timeout else 0.0
        self._show()

    def refit(self) -> None:
        """The message still up, elided again if the room has changed since it was shown (a job started: the jobs
        label grew, and QStatusBar clipped the message under it, mid-word, with no sign)."""
        if self._shown and self.status_bar.currentMessage() == self._shown and self.room() != self._room:
            self._show()

    def _show(self) -> None:
        self._room = self.room()
        shown = elided_at_words(self.text, self.status_bar.fontMetrics(), self._room)
        self.status_bar.setToolTip(self.text if shown != self.text else "")
        left = round((self._until - time.monotonic()) * 1000) if self._until else 0
        self._shown = shown
        self.status_bar.showMessage(shown, max(1, left) if self._until else 0)


class StatusNoticeWidget(QWidget):
    opened = Signal(str)  # the path a link opened (tests listen; the desktop opens it)
    acted = Signal(str)  # the action a link named (show_notice's `action`), for whoever offered it

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.text = ""
        self.path: str | None = None
        self.action: str | None = None
        self._link = ""
        self.label = QLabel()
        self.label.setTextFormat(Qt.RichText)
        self.label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # never widens the window
        self.label.linkActivated.connect(self._open)
        self.close_button = QToolButton(text="×", autoRaise=True, toolTip="Dismiss")
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.close_button)
        self.setVisible(False)

    @classmethod
    def into(cls, status_bar) -> StatusNoticeWidget:
        """A notice in `status_bar`, out of the way while it shows a passing message (both were drawn over each
        other), back after it."""
        notice = cls(status_bar)
        status_bar.addWidget(notice, 1)
        status_bar.messageChanged.connect(notice._on_message)
        return notice

    def _on_message(self, message: str) -> None:
        self.setVisible(bool(self.text) and not message)

    def show_notice(self, text: str, path: str | Path | None = None, link: str = "Show folder",
                    action: str | None = None) -> None:
        """`text`, with `link` opening `path` (a folder or a file, with the desktop's application) when given, or
        emitting `acted(action)` (the notice then goes: it was done)."""
        self.text, self.path, self._link = text, str(path) if path is not None else None, link
        self.action = action
        self.setToolTip(text + (f"\n{self.path}" if self.path else ""))
        self.setVisible(True)
        self._layout_text()

    def dismiss(self) -> None:
        self.text, self.path, self.action = "", None, None
        self.setVisible(False)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._layout_text()

    def _layout_text(self) -> None:
        """The link first (always visible), then the text elided to what is left of the width."""
        metrics = QFontMetrics(self.label.font())
        linked = bool(self.path or self.action)
        link = f'<a href="open">{html.escape(self._link)}</a> · ' if linked else ""
        room = max(40, self.label.width() - (metrics.horizontalAdvance(self._link + " · ") if linked else 0))
        shown = elided_at_words(self.text, metrics, room)
        self.label.setText(link + html.escape(shown))

    def _open(self, _href: str) -> None:
        if self.action:
            action = self.action
            self.dismiss()
            self.acted.emit(action)
            return
        if not self.path:
            return
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(self.path)):  # no file manager (a bare desktop)
            QGuiApplication.clipboard().setText(self.path)
            self.label.setText(f"No program here opens folders: the path is copied ({html.escape(self.path)})")
        self.opened.emit(self.path)
