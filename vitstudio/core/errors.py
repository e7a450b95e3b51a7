"""The kind of error whose message is written for the user (a model not in the offline cache, a damaged file, no
camera): every face shows it as its one line, where any other exception is a bug shown with its traceback.
Torch-free and at the lowest floor, so the GUI's notifier can recognise one without importing the module that
raises it."""

from __future__ import annotations


class UserFacingError(Exception):
    """Mixed into an exception class whose message tells the user what went wrong and what to do."""
