"""Sort images into class folders by the model's prediction: plan (a dry run), apply, undo.

Copy is the default; a move is asked for. A file is never overwritten: a name already taken in the target folder
(by an earlier file, or by one planned in the same run) gets a suffix, `name-1.jpg`, `name-2.jpg`, … Below the
confidence threshold an image goes to the `unsure` folder. Every file actually copied or moved is written to an
undo log (JSON lines, flushed per file) before the next one starts, so even an interrupted sort can be undone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
        parts = ", ".join(f"{label}: {n}" for label, n in self.summary().items())
        return f"Would {verb} {len(self.placements)} images into {self.out} ({parts})."


def safe_folder_name(label: str) -> str:
    """A class name as a folder name: path separators and characters Windows refuses replaced."""
    name = re.sub(r'[<>:"/\\|?*\x00-\x1f]', "_", str(label)).strip(" .")
    return name or "_"


def _free_name(folder: Path, name: str, taken: set[str]) -> Path:
    stem, suffix = os.path.splitext(name)
    candidate, n = name, 0
    while candidate in taken or (folder / candidate).exists():
        n += 1
        candidate = f"{stem}-{n}{suffix}"
    taken.add(candidate)
    return folder / candidate


def plan_sort(predictions: Iterable[tuple[str, str, float]], out: str | Path, min_confidence: float = 0.0,
              move: bool = False) -> SortPlan:
    """predictions: (path, top-1 label, its probability). Targets are chosen now, never clashing."""
    out = Path(out)
    taken: dict[str, set[str]] = {}
    placements = []
    for path, label, confidence in predictions:
        folder_label = label if confidence >= min_confidence else UNSURE
        folder = out / safe_folder_name(folder_label)
        target = _free_name(folder, Path(path).name, taken.setdefault(str(folder), set()))
        placements.append(Placement(str(path), str(target), folder_label, float(confidence)))
    return SortPlan(tuple(placements), str(out), move)


@dataclass(frozen=True)
class SortResult:
    done: int
    log: str  # the undo log
    errors: tuple[tuple[str, str], ...]


def apply_sort(plan: SortPlan, log: str | Path | None = None) -> SortResult:
    """Copy (or move) every planned file; a target that appeared since planning gets the next free name."""
    out = Path(plan.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Path(log) if log else out / time.strftime("vitstudio-sort-%Y%m%d-%H%M%S.jsonl")
    errors, done = [], 0
    with open(log, "a", encoding="utf-8") as record:
        for p in plan.placements:
            target = Path(p.target)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists():  # created by someone else after the plan was made
                    target = _free_name(target.parent, target.name, set())
                (shutil.move if plan.move else shutil.copy2)(p.source, target)
            except OSError as exc:
                errors.append((p.source, str(exc)))
                continue
            record.write(json.dumps({"action": "move" if plan.move else "copy", "source": p.source,
                                     "target": str(target), "label": p.label}) + "\n")
            record.flush()
            done += 1
    return SortResult(done, str(log), tuple(errors))


def undo_sort(log: str | Path) -> tuple[int, list[tuple[str, str]]]:
    """Reverse a sort from its log, newest first: copies are deleted, moves go back (never over an existing
    file). Returns (files undone, problems); the log is renamed `.undone` when everything was reversed."""
    log = Path(log)
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    problems, undone = [], 0
    for entry in reversed(entries):
        source, target = Path(entry["source"]), Path(entry["target"])
        if not target.exists():
            problems.append((str(target), "no longer there"))
            continue
        if entry["action"] == "copy":
            target.unlink()
        elif source.exists():
            problems.append((str(source), "a file is back at the original place; left both alone"))
            continue
        else:
            source.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(target), str(source))
        undone += 1
    if not problems:
        log.rename(log.with_suffix(".undone"))
    return undone, problems
