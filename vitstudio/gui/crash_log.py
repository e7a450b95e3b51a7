"""A crash leaves a trace: `faulthandler` writes the Python stacks of a fatal error (an abort in a binding, a
segfault in a kernel) to `crash.log` in the app's data folder, and a marker file says a session is running. A
start that finds the marker of a session that is gone (its process no longer exists) says so once, naming the log.
Qt-free on purpose: the paths are plain files, so a test can play both sessions."""

from __future__ import annotations

import faulthandler
import os
from pathlib import Path

from vitstudio.core import files

DATA_ENV = files.DATA_ENV  # tests and portable installs: where the app keeps its own files


def data_dir() -> Path:
    return files.data_dir()


class CrashLog:
    """Open at start (`begin`), close on a clean exit (`end`). `previous_crash` is the message for the user, or
    None when the last session ended cleanly (or is still running in another process)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = Path(folder) if folder is not None else data_dir()
        self.log_path = self.folder / "crash.log"
        self.marker = self.folder / "session.pid"
        self._file = None
        self.previous_crash: str | None = None
        self.previous_log: Path | None = None  # the stacks the crashed session left, when it left any

    def begin(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.previous_crash = self._read_previous()
            if self.previous_crash is not None and self.log_path.is_file():
                # keep the last crash's stacks for the user to read; this session writes a fresh log
                self.log_path.replace(self.log_path.with_name("crash.previous.log"))
                kept = self.folder / "crash.previous.log"
                self.previous_log = kept if kept.stat().st_size > 0 else None
                self.previous_crash = self.previous_crash.replace(str(self.log_path),
                                                                  str(self.folder / "crash.previous.log"))
            self._file = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 (held for faulthandler)
            faulthandler.enable(file=self._file, all_threads=True)
            self.marker.write_text(str(os.getpid()))
        except OSError:  # a read-only home must not stop the app: it just runs without a crash log
            self._file = None

    def tell(self, window) -> None:
        """The previous session's crash, if any, as the window's notice: in sight, not modal, with the log it left."""
        if self.previous_crash:
            window.show_notice(self.previous_crash, str(self.previous_log or self.folder),
                               "Open the log" if self.previous_log else "Show folder")

    def end(self) -> None:
        """A clean exit: no marker is left, and an empty log is removed."""
        if self._file is None:
            return
        faulthandler.disable()
        self._file.close()
        self._file = None
        for path in (self.marker, self.log_path):
            try:
                if path == self.marker or path.stat().st_size == 0:
                    path.unlink()
            except OSError:
                pass

    def _read_previous(self) -> str | None:
        try:
            pid = int(self.marker.read_text().strip() or 0)
        except (OSError, ValueError):
            return None
        if pid and pid != os.getpid() and _alive(pid):
            return None  # another ViT Studio is running now; its marker is not a crash
        has_log = self.log_path.is_file() and self.log_path.stat().st_size > 0
        where = f"; the log is at {self.log_path}" if has_log else " (no error was recorded: it was killed)"
        return f"ViT Studio closed unexpectedly last time{where}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True
