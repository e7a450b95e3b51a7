"""What the app tells the user went wrong: an exception kept as an object, with a one-line message and the
details (the traceback) on demand. Qt-free: the window decides how to show it (log, status bar, a non-modal box
whose "Show details" opens the traceback)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from vitstudio.core.errors import UserFacingError


def describe(exc: BaseException) -> str:
    """One line for the user: the message, or the exception's type when it has none."""
    text = str(exc).strip()
    return text if text else type(exc).__name__


def told(exc: BaseException) -> bool:
    """The message was written for the user (the core's `UserFacingError`): logged as that one line."""
    return isinstance(exc, UserFacingError)


@dataclass(frozen=True)
class Notice:
    """One error for the user. `context` says what was being done ("Loading model"); `exc` is kept so a caller
    (or a test) can tell a MemoryError from a bad file without parsing text."""

    exc: BaseException
    context: str = ""

    @property
    def message(self) -> str:
        text = describe(self.exc)
        return f"{self.context}: {text}" if self.context else text

    @property
    def logged(self) -> str:
        """What the log keeps: the message, and the traceback unless the message was written for the user."""
        return self.message if told(self.exc) else f"{self.message}\n{self.details}"

    @property
    def details(self) -> str:
        """The traceback (kept as text by a worker, whose frames are freed), else its type and message."""
        kept = getattr(self.exc, "traceback_text", None)
        if kept:
            return kept
        if self.exc.__traceback__ is not None:
            return "".join(traceback.format_exception(self.exc))
        return f"{type(self.exc).__name__}: {describe(self.exc)}"
