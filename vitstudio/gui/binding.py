"""Is the Qt binding safe to run on? PySide6 6.12.0 on Python 3.11 drops one reference to `None` for every call that
returns nothing (`QLabel.setText`, `QProgressBar.setValue`, `QObject.setObjectName`, …); Python aborts with
`Fatal Python error: none_dealloc` once the count reaches zero — a few minutes into live training curves.
Measured: 6.12.0 loses exactly 1 per call, 6.11.3 none. On Python >= 3.12 `None` is immortal and the bug is
harmless. The check costs 64 calls (~30 µs) and gives back what a broken binding took, so refusing is safe."""

from __future__ import annotations

import ctypes
import sys

PROBE_CALLS = 64
FIX = "pip install 'PySide6-Essentials>=6.6,<6.12'"


def _probe_call(obj) -> None:
    obj.setObjectName("vitstudio-binding-probe")  # returns nothing: the kind of call the bug hits


def none_refcount_drift(call, calls: int = PROBE_CALLS) -> int:
    """How many references to None `calls` calls of `call()` lost (negative) or kept (positive)."""
    before = sys.getrefcount(None)
    for _ in range(calls):
        call()
    return sys.getrefcount(None) - before


def binding_problem() -> str | None:
    """A one-line message when the installed PySide6 leaks references to None on this Python, else None."""
    if sys.version_info >= (3, 12):
        return None  # None is immortal: its count cannot reach zero
    from PySide6 import __version__ as version
    from PySide6.QtCore import QObject

    obj = QObject()
    drift = none_refcount_drift(lambda: _probe_call(obj))
    if drift > -PROBE_CALLS // 2:
        return None
    for _ in range(-drift):  # give back what the broken binding took, so shutting down cannot hit zero
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(None))
    return (f"ViT Studio cannot run on PySide6 {version} with Python {sys.version.split()[0]}: this release drops a "
            f"reference to None on every call ({-drift} of {PROBE_CALLS} here) and the app would abort within "
            f"minutes. Install a fixed release: {FIX}")
