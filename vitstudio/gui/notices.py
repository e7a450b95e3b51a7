"""What the app tells the user went wrong: an exception kept as an object, with a one-line message and the
details (the traceback) on demand. Qt-free: the window decides how to show it (log, status bar, a non-modal box
whose "Show details" opens the traceback)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass


def describe(exc: BaseException) -> str:
    """One line for the user: the message, or the exception's type when it has none."""
    text = str(exc).strip()
    return text if text else type(exc).__name__


# Exceptions whose message is written for the user (a model not in the offline cache, no camera, a damaged file):
# logged as that one line. Any other exception is a bug, logged with its traceback. By name: this module is Qt- and
# torch-free, and importing the modules that define them would load torch.
TOLD = frozenset({"ModelLoadError", "DatasetError", "VideoSourceError", "ImageReadError", "RunFileError",
                  "ConfigError", "CheckpointError", "WeightsUnavailable", "RunInUse", "GPUOutOfMemory"})


def told(exc: BaseException) -> bool:
    return any(kind.__name__ in TOLD for kind in type(exc).__mro__)


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
