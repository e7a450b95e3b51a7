"""The Qt binding must keep `None` alive (PySide6 6.12.0 on Python 3.11 did not: the app aborted with
`none_dealloc` after minutes of live curves), the app must refuse a binding that leaks, and a crash must leave a log
that the next start points to."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
needs_mortal_none = pytest.mark.skipif(sys.version_info >= (3, 12), reason="None is immortal on Python >= 3.12")


@needs_mortal_none
def test_installed_binding_keeps_none_alive(qapp):
    """100,000 calls of each kind the app makes all the time; a leaking binding loses 100,000 (and aborts first)."""
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
    from vitstudio.gui.binding import binding_problem

    assert binding_problem() is None


def _main_py(args: list[str], data_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "VITSTUDIO_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)


def test_a_crash_is_logged_and_the_next_start_says_so(tmp_path):
    data_dir = tmp_path / "data"
    crash = ("import faulthandler; from vitstudio.gui.crash_log import CrashLog; CrashLog().begin(); "
             "faulthandler._sigsegv()")
    env = {**os.environ, "VITSTUDIO_DATA_DIR": str(data_dir)}
    res = subprocess.run([sys.executable, "-c", crash], cwd=ROOT, env=env, capture_output=True, timeout=60)
    assert res.returncode != 0
    assert "Segmentation fault" in (data_dir / "crash.log").read_text()

    res = _main_py(["--screenshot", str(tmp_path / "s.png")], data_dir, tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    previous = data_dir / "crash.previous.log"
    assert f"ViT Studio closed unexpectedly last time; the log is at {previous}" in res.stderr
    assert "Segmentation fault" in previous.read_text()
    assert not (data_dir / "session.pid").exists() and not (data_dir / "crash.log").exists()  # a clean exit

    from vitstudio.gui.crash_log import CrashLog

    assert CrashLog(data_dir)._read_previous() is None  # the next start (what it reads first) says nothing


def test_a_running_session_is_not_a_crash(tmp_path):
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
