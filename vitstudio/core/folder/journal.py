"""The sort journal: JSON lines, each written and flushed before the next step, so a kill at any instant leaves a
record from which the sort can be finished (`resume`) or undone.

Records, in the order they are written:
  header   {"op": "header", "version": 2, "kind": "sort"|"review-move", "action": "copy"|"move", "out": DIR}
  plan     {"op": "plan", "i": N, "source", "target", "label"}            every placement, before any file is touched
  mkdir    {"op": "mkdir", "path"}                                       before creating a folder the sort needs
  intent   {"op": "intent", "i", "action", "source", "target", "part", "size"[, "sha256" of a file to move]}
           written *before* the file operation
  done     {"op": "done", "i", "target", "size", "sha256"}                after it (size and hash of the placed file)
  failed   {"op": "failed", "i", "reason"}                                 nothing left behind
  abandoned{"op": "abandoned", "i", "reason"}                              an interrupted intent that did not happen
  end      {"op": "end"}                                                   the run got to the end of its plan
  undone / kept {"op": ..., "i"[, "reason"]}, undo-end                    written by the undo as it goes

An intent without a later outcome is *pending*: the kill came between the two lines; the file system says which
side of the operation it stopped on (see `sorting.recover` and `undo`). A torn last line is ignored.
Logs of version 1 (one line per finished file: action, source, target, label) are read as plan + done records.
"""

from __future__ import annotations

import errno
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

VERSION = 2
RESOLVED = ("done", "failed", "abandoned")


@dataclass
class JournalState:
    path: Path
    header: dict = field(default_factory=dict)
    plan: dict[int, dict] = field(default_factory=dict)  # i -> plan record, in plan order
    intent: dict[int, dict] = field(default_factory=dict)  # i -> its latest intent
    status: dict[int, str] = field(default_factory=dict)  # i -> pending | done | failed | abandoned
    outcome: dict[int, dict] = field(default_factory=dict)  # i -> its latest outcome record
    undo: dict[int, dict] = field(default_factory=dict)  # i -> undone / kept record
    mkdirs: list[str] = field(default_factory=list)
    undo_started: bool = False

    @property
    def action(self) -> str:
        return self.header.get("action", "copy")

    def unfinished(self) -> list[int]:
        """Placements not yet done or failed (never tried, interrupted, or abandoned after an interruption)."""
        return [i for i in self.plan if self.status.get(i) not in ("done", "failed")]

    def resumable(self) -> bool:
        return not self.undo_started and bool(self.unfinished())


def read(path: str | Path) -> JournalState:
    path = Path(path)
    state = JournalState(path)
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line torn by a kill
        if not isinstance(rec, dict):
            continue
        op = rec.get("op")
        if op is None and "action" in rec:  # version 1: one line per finished file
            i = len(state.plan)
            state.header.setdefault("action", rec["action"])
            state.plan[i] = {"op": "plan", "i": i, "source": rec["source"], "target": rec["target"],
                             "label": rec.get("label")}
            state.intent[i] = {**state.plan[i], "op": "intent", "action": rec["action"]}
            state.status[i], state.outcome[i] = "done", {"op": "done", "i": i, "target": rec["target"]}
        elif op == "header":
            state.header = rec
        elif op == "plan":
            state.plan[rec["i"]] = rec
        elif op == "mkdir":
            state.mkdirs.append(rec["path"])
        elif op == "intent":
            state.intent[rec["i"]], state.status[rec["i"]] = rec, "pending"
        elif op in RESOLVED:
            state.status[rec["i"]], state.outcome[rec["i"]] = op, rec
        elif op in ("undone", "kept"):
            state.undo[rec["i"]], state.undo_started = rec, True
        elif op == "undo-start":
            state.undo_started = True
    return state


class Journal:
    """Append records, one JSON line each, flushed to the OS before returning (a SIGKILL cannot lose them)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        torn = self.path.exists() and self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n")
        self._file = open(self.path, "a", encoding="utf-8")
        if torn:
            self._file.write("\n")  # end the torn line so the next record stands alone

    def write(self, op: str, **fields) -> None:
        self._file.write(json.dumps({"op": op, **fields}) + "\n")
        self._file.flush()

    def sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class JournalBusy(OSError):
    """Another process is sorting or undoing from this journal right now."""


@contextmanager
def locked(path: str | Path):
    """Hold an exclusive lock on the journal while working from it: a second sort or undo of the same journal fails
    at once instead of interleaving with the first. The lock dies with its process (even on SIGKILL)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here; one process at a time is the user's to keep
        yield
        return
    with open(path, "a", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise JournalBusy(errno.EBUSY, "another sort or undo is working from this journal", str(path)) from None
        yield


def new_path(folder: str | Path, prefix: str) -> Path:
    """A journal name not taken yet: PREFIX-YYYYmmdd-HHMMSS[-N].jsonl."""
    folder = Path(folder)
    stem = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = folder / f"{stem}.jsonl", 0
    while path.exists() or path.with_suffix(".undone").exists():
        n += 1
        path = folder / f"{stem}-{n}.jsonl"
    return path


def live_journals(folder: str | Path, out: str | Path, action: str) -> list[JournalState]:
    """Journals in `folder` of sorts into `out` with `action` that no undo has touched, oldest first."""
    folder, out = Path(folder), os.path.abspath(out)
    found = []
    for path in sorted(folder.glob("vitstudio-*.jsonl")) if folder.is_dir() else []:
        try:
            state = read(path)
        except (OSError, ValueError, KeyError):
            continue
        if state.header.get("out") == out and state.action == action and not state.undo_started:
            found.append(state)
    return found


def relocations(path: str | Path) -> dict[str, str]:
    """Where the files a journal moved are now, {old path: new path}: for a sort or move, each file it moved
    (and no undo has put back); after an undo, each file the undo put back (target -> original place). Copies
    are left out: their originals never moved. What a table of the folder must rename to stay true."""
    state = read(path)
    moved = {i for i, status in state.status.items()
             if status == "done" and state.intent.get(i, {}).get("action", state.action) == "move"}
    if state.undo_started:
        return {state.outcome[i]["target"]: state.plan[i]["source"] for i in moved
                if state.undo.get(i, {}).get("op") == "undone"}
    return {state.plan[i]["source"]: state.outcome[i]["target"] for i in moved}
