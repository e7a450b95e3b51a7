"""Undo a sort (or a label-review move) from its journal, newest first, without ever destroying a file.

- A copy is removed only when its bytes are still those the sort wrote (size and sha256 in the journal; for an
  interrupted copy or an old log without a hash: identical to the original). A copy edited since is kept and listed.
- A moved file goes back to its original place, never over a file there: if the original place holds the same bytes
  (a move across filesystems killed between copy and removal) the extra copy is removed, otherwise both are kept
  and listed.
- Folders the sort created are removed when empty; the others are listed.
- Each reversal is journalled as it happens, so an undo killed half-way is finished by running it again. When
  nothing is left to retry the journal is renamed `.undone`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import files
from . import fileops, journal


@dataclass(frozen=True)
class UndoResult:
    log: str
    removed: int  # copies removed
    moved_back: int  # moved files put back
    kept: tuple[str, ...]  # copies changed since the sort, kept
    folders_removed: tuple[str, ...]
    folders_kept: tuple[str, ...]  # created by the sort, not empty now
    problems: tuple[tuple[str, str], ...]  # nothing could be done for these; a rerun tries again
    notes: tuple[str, ...] = ()

    @property
    def undone(self) -> int:
        return self.removed + self.moved_back

    def describe(self) -> str:
        lines = [f"Undid {files.counted(self.undone, 'file')} ({_copies(self.removed)} removed, {self.moved_back} "
                 f"moved back); removed {files.counted(len(self.folders_removed), 'empty folder')} the sort had "
                 f"created."]
        if self.kept:
            lines.append(f"Kept {_copies(len(self.kept))} changed since the sort (they are yours now):")
            lines += [f"  kept {p}" for p in self.kept]
        if self.folders_kept:
            lines.append(f"Left {files.counted(len(self.folders_kept), 'folder')} the sort had created, not empty:")
            lines += [f"  {p}" for p in self.folders_kept]
        lines += [f"  {note}" for note in self.notes]
        if not self.problems:
            lines.append(f"Journal closed: {self.log}")
        return "\n".join(lines)


def _copies(n: int) -> str:
    return f"{n} cop{'y' if n == 1 else 'ies'}"


def journal_for(target: str | Path) -> Path:
    """The journal an undo reverses: `target` itself when it is a file; for a folder, the newest journal not yet
    undone of the sorts into it (or the label-review moves inside it), from the app's data folder, then, for sorts
    made before journals moved there, from inside the folder itself."""
    target = Path(target)
    if not target.is_dir():
        return target  # a journal (undo_sort says clearly when it is not there)
    for folder in (files.journals_dir(target), target):
        found = sorted(folder.glob("vitstudio-*.jsonl"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
        if found:
            return found[-1]
    raise FileNotFoundError(2, "no sort or move into this folder is left to undo (nothing journalled in "
                               f"{files.journals_dir(target)})", str(target))


def undo_sort(log: str | Path) -> UndoResult:
    log = Path(log)
    if not log.is_file():
        raise FileNotFoundError(2, "no such sort journal", str(log))
    tally = {"removed": 0, "moved_back": 0, "kept": [], "problems": [], "notes": []}
    with journal.locked(log), journal.Journal(log) as record:
        state = journal.read(log)
        record.write("undo-start")
        for i in reversed(list(state.plan)):
            if i in state.undo or state.status.get(i) not in ("done", "pending"):
                if i in state.intent:
                    fileops.remove_quietly(state.intent[i].get("part"))
                continue
            rec = {**state.intent.get(i, state.plan[i]), **state.outcome.get(i, {})}
            fileops.remove_quietly(rec.get("part"))
            try:
                outcome = (_undo_copy if rec.get("action", state.action) == "copy" else _undo_move)(
                    rec, state.status[i] == "done", tally)
            except OSError as exc:
                tally["problems"].append((rec["target"], exc.strerror or str(exc)))
                continue
            if outcome is not None:
                record.write(outcome[0], i=i, **outcome[1])
        removed, kept_dirs = _remove_folders(state.mkdirs)
        record.write("undo-end")
    if state.action == "move":  # the tags the sort carried go back with the files (views.carry_tags)
        from vitstudio.core.folder.views import carry_tags

        carry_tags(journal.relocations(log))
    if not tally["problems"]:
        log.rename(log.with_suffix(".undone"))
        log = log.with_suffix(".undone")
    return UndoResult(str(log), tally["removed"], tally["moved_back"], tuple(tally["kept"]), tuple(removed),
                      tuple(kept_dirs), tuple(tally["problems"]), tuple(tally["notes"]))


def _undo_copy(rec: dict, finished: bool, tally: dict):
    target, source = rec["target"], rec["source"]
    if not os.path.lexists(target):
        if finished:
            tally["notes"].append(f"{target}: already gone")
        return "undone", {}
    if rec.get("sha256") and finished:
        ours = fileops.file_hash(target) == (rec.get("size"), rec["sha256"])
    else:  # interrupted before its outcome was written, or an old log: ours only if identical to the original
        ours = fileops.same_bytes(source, target)
        if not ours and not finished:
            return "undone", {}  # the copy never got there: whatever is at that name is someone else's
    if not ours:
        tally["kept"].append(target)
        return "kept", {"reason": "changed since the sort"}
    os.unlink(target)
    tally["removed"] += 1
    return "undone", {}


def _undo_move(rec: dict, finished: bool, tally: dict):
    target, source = rec["target"], rec["source"]
    fileops.remove_quietly(fileops.part_name(source, "undo"))  # left by an undo killed mid-copy
    have_src, have_tgt = os.path.lexists(source), os.path.lexists(target)
    if have_tgt and have_src:
        if fileops.same_bytes(source, target):  # a move across filesystems interrupted after its copy
            os.unlink(target)
            return "undone", {}
        tally["problems"].append((source, f"a different file is at the original place; left it and {target}"))
        return None
    if have_tgt:
        os.makedirs(os.path.dirname(source), exist_ok=True)
        if rec.get("sha256") and fileops.file_hash(target) != (rec.get("size"), rec["sha256"]):
            tally["notes"].append(f"{target}: changed since the sort, moved back as it is")
        fileops.move_file(target, source, fileops.part_name(source, "undo"))
        tally["moved_back"] += 1
        return "undone", {}
    if have_src:
        return "undone", {}  # the move never happened (interrupted) or the file is already back
    tally["problems"].append((source, f"neither the original nor {target} exists"))
    return None


def _remove_folders(folders: list[str]) -> tuple[list[str], list[str]]:
    """Remove the folders the sort created that are empty now, deepest first; list the others."""
    removed, kept = [], []
    for folder in sorted(set(folders), key=lambda f: f.count(os.sep), reverse=True):
        if not os.path.isdir(folder):
            continue
        try:
            os.rmdir(folder)
            removed.append(folder)
        except OSError:
            kept.append(folder)
    return removed, kept
