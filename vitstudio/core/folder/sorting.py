"""Sort images into class folders by the model's prediction: plan (a dry run), apply, resume, undo.

Copy is the default; a move is asked for. A file is never overwritten: a name already taken in the target folder
(by an earlier file, or by one planned in the same run) gets a suffix, `name-1.jpg`, `name-2.jpg`, … Below the
confidence threshold an image goes to the `unsure` folder.

Journal first (see `journal.py`): the whole plan, then for each file its intent, then the file operation (through a
temporary name, `fileops.py`), then its outcome — each line flushed before the next step. A sort killed at any
instant is finished by running it again (the unfinished journal of that output folder is resumed: nothing is done
twice) or by `vitstudio sort --resume LOG`, and undone from the same journal (`undo.py`). Journals live in the app's
data folder, keyed by the resolved path of the folder sorted into (`journal_dir`; for a label-review move, the
dataset), never in the user's folders. An output folder inside a source folder (or the reverse) is refused: each
rerun would sort its own output again.
"""

from __future__ import annotations

import errno
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import files
from . import fileops, journal
from .undo import UndoResult, undo_sort  # noqa: F401  (the undo lives beside; imported from here by callers)

UNSURE = "unsure"


@dataclass(frozen=True)
class Placement:
    source: str
    target: str
    label: str  # the folder it goes to: a class name or UNSURE
    confidence: float


@dataclass(frozen=True)
class SortPlan:
    placements: tuple[Placement, ...]
    out: str
    move: bool

    def summary(self) -> dict[str, int]:
        """Images per target folder, for the dry-run message."""
        return dict(sorted(Counter(p.label for p in self.placements).items()))

    def describe(self) -> str:
        verb = "move" if self.move else "copy"
        parts = ", ".join(f"{files.shown_path(label)}: {n}" for label, n in self.summary().items())
        return (f"Would {verb} {files.counted(len(self.placements), 'image')} into {files.shown_path(self.out)} "
                f"({parts}).")


class NestedFoldersError(ValueError):
    """The output folder is inside a source folder, or a source folder inside the output."""


def safe_folder_name(label: str) -> str:
    """A class name as a folder name: path separators and characters Windows refuses replaced."""
    name = re.sub(r'[<>:"/\\|?*\x00-\x1f]', "_", str(label)).strip(" .")
    return name or "_"


def class_folders(labels: Iterable[str]) -> dict[str, str]:
    """A folder name for each class, distinct for distinct classes: "." and "..", "a/b" and "a_b", or "Cat" and "cat"
    (one folder on macOS and Windows) would share one after `safe_folder_name`; the later one in sorted order gets
    "-2", "-3", … (sorted, so a rerun names them the same)."""
    names: dict[str, str] = {}
    used: set[str] = set()
    for label in sorted(set(labels)):
        base = safe_folder_name(label)
        name, n = base, 1
        while name.casefold() in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name.casefold())
        names[label] = name
    return names


def journal_dir(folder: str | Path) -> Path:
    """Where the journals of sorts into `folder` (and of label-review moves inside it) are kept: the app's data
    folder, keyed by the folder's resolved path, never the folder itself."""
    return files.journals_dir(folder)


def check_out_folder(sources: Iterable[str | Path], out: str | Path) -> None:
    """Refuse an output folder inside a source folder, or a source folder inside (or equal to) the output."""
    out_real = os.path.realpath(out)
    for source in sources:
        if not os.path.isdir(source):
            continue
        src_real = os.path.realpath(source)
        if out_real == src_real or out_real.startswith(src_real.rstrip(os.sep) + os.sep):
            raise NestedFoldersError(f"the output folder {out} is inside the source folder {source}: each rerun "
                                     "would sort its own output again; choose a folder outside it")
        if src_real.startswith(out_real.rstrip(os.sep) + os.sep):
            raise NestedFoldersError(f"the source folder {source} is inside the output folder {out}; choose an "
                                     "output folder outside it")


def _free_name(folder: Path, name: str, taken: set[str]) -> Path:
    stem, suffix = os.path.splitext(name)
    candidate, n = name, 0
    while candidate in taken or os.path.lexists(folder / candidate):
        n += 1
        candidate = f"{stem}-{n}{suffix}"
    taken.add(candidate)
    return folder / candidate


def plan_sort(predictions: Iterable[tuple[str, str, float]], out: str | Path, min_confidence: float = 0.0,
              move: bool = False) -> SortPlan:
    """predictions: (path, top-1 label, its probability). Targets are chosen now, never clashing."""
    out = Path(out)
    predictions = [(path, label if confidence >= min_confidence else UNSURE, confidence)
                   for path, label, confidence in predictions]
    folders = class_folders({label for _, label, _ in predictions})
    taken: dict[str, set[str]] = {}
    placements = []
    for path, folder_label, confidence in predictions:
        folder = out / folders[folder_label]
        target = _free_name(folder, Path(path).name, taken.setdefault(str(folder), set()))
        placements.append(Placement(str(path), str(target), folder_label, float(confidence)))
    return SortPlan(tuple(placements), str(out), move)


@dataclass(frozen=True)
class SortResult:
    done: int  # files placed by this run
    log: str  # the journal (undo with it)
    errors: tuple[tuple[str, str], ...]
    already: int = 0  # placed before: by the interrupted run this one resumed, or an earlier finished sort
    resumed: bool = False
    move: bool = False

    def describe(self) -> str:
        verb = "Moved" if self.move else "Copied"
        text = f"{verb} {files.counted(self.done, 'image')}"
        if self.already:
            text += f" ({self.already} already sorted{' by the interrupted run, resumed' if self.resumed else ''})"
        if self.errors:
            text += f"; {len(self.errors)} failed (nothing left behind for them)"
        return text + f".\nUndo with: vitstudio undo-sort {self.log}"


def prepare_sort(plan: SortPlan, log: str | Path | None = None, log_dir: str | Path | None = None,
                 kind: str = "sort") -> Path:
    """Write the plan to a journal before any file is touched; returns the journal. An unfinished journal of a
    sort into the same folder with the same action is resumed instead: its placements stand (pending ones are
    recovered first) and only sources it does not hold are added; copies already made by an earlier finished sort
    (and still there) are not made again."""
    out = Path(plan.out)
    out.mkdir(parents=True, exist_ok=True)
    action = "move" if plan.move else "copy"
    folder = Path(log).parent if log else Path(log_dir or journal_dir(out))
    folder.mkdir(parents=True, exist_ok=True)
    live = journal.live_journals(folder, out, action)
    current = next((s for s in reversed(live) if s.resumable()), None)
    if log:
        path = Path(log)
    elif current is not None:
        path = current.path
    else:
        if live and not [p for p in plan.placements if os.path.abspath(p.source) not in _covered(live, None, action)]:
            return live[-1].path  # everything is sorted already: nothing to add, nothing to do
        path = journal.new_path(folder, "vitstudio-sort" if kind == "sort" else "vitstudio-move")
    with journal.locked(path), journal.Journal(path) as record:
        state = journal.read(path)
        if not state.header:
            record.write("header", version=journal.VERSION, kind=kind, action=action, out=os.path.abspath(out))
            state = journal.read(path)
        recover(state, record)  # settle what a kill interrupted before planning around it
        covered = _covered([s for s in live if s.path != path] + [state], state, action)
        i = max(state.plan, default=-1) + 1
        for p in plan.placements:
            if os.path.abspath(p.source) in covered:
                continue
            covered.add(os.path.abspath(p.source))  # (and the same file twice in one plan)
            record.write("plan", i=i, source=os.path.abspath(p.source), target=os.path.abspath(p.target),
                         label=p.label)
            i += 1
        record.sync()
    return path


def _covered(live: list[journal.JournalState], current, action: str) -> set[str]:
    """Sources a new plan must leave out: those the resumed journal holds, and copies an earlier finished sort
    into the same folder made that are still there."""
    covered = {os.path.abspath(p["source"]) for p in current.plan.values()} if current is not None else set()
    for other in live:
        if other is not current and action == "copy":
            covered |= {os.path.abspath(other.plan[i]["source"]) for i, s in other.status.items()
                        if s == "done" and os.path.lexists(other.outcome[i]["target"])}
    return covered


def recover(state: journal.JournalState, record: journal.Journal) -> None:
    """Settle every pending intent (a kill came between the intent and its outcome) from what is on disk."""
    for i, status in list(state.status.items()):
        if status != "pending":
            continue
        rec = state.intent[i]
        source, target = rec["source"], rec["target"]
        fileops.remove_quietly(rec.get("part"))
        have_src, have_tgt = os.path.lexists(source), os.path.lexists(target)
        if rec["action"] == "copy":
            if have_tgt and have_src and fileops.same_bytes(source, target):
                size, digest = fileops.file_hash(target)
                _outcome(state, record, "done", i, target=target, size=size, sha256=digest)
            else:
                _outcome(state, record, "abandoned", i, reason="interrupted before the copy was in place")
        elif have_tgt and not have_src:
            _outcome(state, record, "done", i, target=target, size=rec.get("size"), sha256=rec.get("sha256"))
        elif have_tgt and have_src and fileops.same_bytes(source, target):
            try:  # a move across filesystems stopped after the copy: finish it
                os.unlink(source)
                _outcome(state, record, "done", i, target=target, size=rec.get("size"), sha256=rec.get("sha256"))
            except OSError as exc:
                os.unlink(target)
                _outcome(state, record, "failed", i, reason=f"could not remove the original: {exc.strerror}")
        elif have_src:
            _outcome(state, record, "abandoned", i, reason="interrupted before the move")
        else:
            _outcome(state, record, "failed", i, reason="neither the original nor the target exists")


def _outcome(state: journal.JournalState, record: journal.Journal, op: str, i: int, **fields) -> None:
    record.write(op, i=i, **fields)
    state.status[i], state.outcome[i] = op, {"op": op, "i": i, **fields}


def run_sort(log: str | Path, cancel=None) -> SortResult:
    """Carry out (or finish) the journal's plan: every placement not yet done, each journalled before and after."""
    path = Path(log)
    if not path.is_file():
        raise FileNotFoundError(errno.ENOENT, "no such sort journal", str(path))
    done, errors = 0, []
    with journal.locked(path), journal.Journal(path) as record:
        state = journal.read(path)
        action = state.action
        resumed = bool(state.status)  # an earlier run got as far as touching files
        recover(state, record)
        already = sum(s == "done" for s in state.status.values())
        for i in state.unfinished() + [i for i in state.plan if state.status.get(i) == "failed"]:
            if cancel is not None and cancel.cancelled:
                break
            p = state.plan[i]
            try:
                _place(state, record, i, p, action)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                if exc.filename:
                    reason = f"{reason}: {exc.filename}"
                _outcome(state, record, "failed", i, reason=reason)
                errors.append((p["source"], reason))
                continue
            done += 1
        else:
            record.write("end")
    if action == "move":  # the moved files' tags go with them (views.carry_tags; an undo carries them back)
        from vitstudio.core.folder.views import carry_tags

        carry_tags(journal.relocations(path), state.header.get("out"))
    return SortResult(done, str(path), tuple(errors), already, resumed and already > 0, action == "move")


def _place(state, record, i: int, p: dict, action: str) -> None:
    source = p["source"]
    if not os.path.lexists(source):
        raise FileNotFoundError(2, "the original is no longer there", source)
    if action == "move" and not fileops.source_folder_writable(source):
        raise PermissionError(13, "the source folder is read-only, so the original cannot be removed: not moved "
                                  "(nothing copied)", source)
    target = Path(p["target"])
    _make_folders(state, record, target.parent)
    if os.path.lexists(target):  # taken since the plan was made (by someone else, or an abandoned attempt)
        target = _free_name(target.parent, target.name, set())
    part = fileops.part_name(target, i)
    if action == "copy":
        record.write("intent", i=i, action=action, source=source, target=str(target), part=str(part),
                     size=os.path.getsize(source))
        size, digest = fileops.copy_into_place(source, target, part)
    else:
        size, digest = fileops.file_hash(source)
        record.write("intent", i=i, action=action, source=source, target=str(target), part=str(part), size=size,
                     sha256=digest)
        fileops.move_file(source, target, part)
    _outcome(state, record, "done", i, target=str(target), size=size, sha256=digest)


def _make_folders(state, record, folder: Path) -> None:
    """Create the target folder and any missing parents, each journalled before it is made (undo removes them)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for f in reversed(missing):
        record.write("mkdir", path=str(f))
        state.mkdirs.append(str(f))
        f.mkdir(exist_ok=True)


def apply_sort(plan: SortPlan, log: str | Path | None = None, log_dir: str | Path | None = None,
               kind: str = "sort", cancel=None) -> SortResult:
    """Copy (or move) every planned file, journal first; resumes an interrupted sort into the same folder."""
    return run_sort(prepare_sort(plan, log, log_dir, kind), cancel)
