"""The Qt binding must keep `None` alive (PySide6 6.12.0 on Python 3.11 did not: the app aborted with
`none_dealloc` after minutes of live curves), the app must refuse a binding that leaks, and a crash must leave a log
that the next start points to (the start itself: tests/gui/test_app_starts.py)."""

from __future__ import annotations

import ctypes
import os
import sys

import pytest

needs_mortal_none = pytest.mark.skipif(sys.version_info >= (3, 12), reason="None is immortal on Python >= 3.12")


@needs_mortal_none
def test_installed_binding_keeps_none_alive(qapp):
    """100,000 calls of each kind the app makes all the time; a leaking binding loses 100,000 (and aborts first).

    100,000 QLabel.setText / QProgressBar.setValue / Signal.emit calls change None's refcount by < 100. [Python < 3.12
    only]
    """
    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QLabel, QProgressBar

    class Emitter(QObject):
        changed = Signal(bool)

    label, bar, emitter = QLabel(), QProgressBar(), Emitter()
    received = []
    emitter.changed.connect(received.append)
    calls = {"QLabel.setText": lambda: label.setText("x"), "QProgressBar.setValue": lambda: bar.setValue(3),
             "Signal(bool).emit": lambda: emitter.changed.emit(True)}
    for name, call in calls.items():
        before = sys.getrefcount(None)
        for _ in range(100_000):
            call()
        drift = sys.getrefcount(None) - before
        assert abs(drift) < 100, f"{name}: the binding changed None's reference count by {drift} in 100k calls"
    assert len(received) == 100_000


def _leaking_call(_obj) -> None:
    """What PySide6 6.12.0 does on Python 3.11: a call that returns None and drops a reference to it."""
    ctypes.pythonapi.Py_DecRef(ctypes.py_object(None))


@needs_mortal_none
def test_startup_refuses_a_leaking_binding(monkeypatch, capsys):
    """With a simulated leaking probe, `app.main` exits 2 with one line naming the fix; the probe gives back what it
    took. [Python < 3.12 only]
    """
    from vitstudio.gui import app, binding

    monkeypatch.setattr(binding, "_probe_call", _leaking_call)
    assert app.main(["--screenshot", "unused.png"]) == 2
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1
    assert "drops a reference to None" in message and binding.FIX in message
    before = sys.getrefcount(None)
    assert binding.binding_problem() is not None
    assert abs(sys.getrefcount(None) - before) < 4  # what the simulated leak took was given back


def test_the_check_passes_the_installed_binding(qapp):
    """`binding_problem()` is None for the installed PySide6."""
    from vitstudio.gui.binding import binding_problem

    assert binding_problem() is None


def test_a_running_session_is_not_a_crash(tmp_path):
    """A session.pid of a live process is not a crash, of a gone one is; end() removes markers."""
    from vitstudio.gui.crash_log import CrashLog

    first = CrashLog(tmp_path)
    first.begin()
    (tmp_path / "session.pid").write_text(str(os.getppid()))  # another live process holds the marker
    assert CrashLog(tmp_path)._read_previous() is None
    (tmp_path / "session.pid").write_text("999999999")  # a process that is gone
    assert "closed unexpectedly" in CrashLog(tmp_path)._read_previous()
    first.end()
    assert not (tmp_path / "session.pid").exists() and not (tmp_path / "crash.log").exists()
    import faulthandler

    faulthandler.enable(file=sys.__stderr__)  # begin() took pytest's faulthandler over
