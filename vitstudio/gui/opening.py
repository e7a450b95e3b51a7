"""Opening files and folders into the image strip. Only images not already in the strip are read (opening the same
files twice adds nothing); Open recent keeps one entry per open (the folder, the file, or the set of files of one
multi-open) and only once something in it opened: an empty folder or unreadable files are said, not remembered."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass

from vitstudio.app.app_state import AppState, make_entry
from vitstudio.core.data.images import ImageReadError, expand_paths, read_image
from vitstudio.core.files import counted, shown_path

RECENT_KEPT = 10
BATCH_SECONDS = 0.1  # images join the strip in batches: one event per batch, not one per image


@dataclass(frozen=True)
class Opened:
    """What one open found: images read, files that could not be read, images already in the strip."""

    readable: int
    unreadable: tuple[tuple[str, str], ...]  # (path, why) of each file that could not be read
    already: int
    limited: bool = False  # stopped at the strip's limit (a folder opened in the Folder tab as well)


def same_path(path) -> str:
    return os.path.normcase(os.path.abspath(str(path)))


def read_new_images(cancel, paths: list[str], known: frozenset[str], limit: int | None = None):
    """Runs in a worker: yields lists of entries, one per image (or per unreadable file) of `paths` not in `known`
    (paths made by `same_path`), a list at most every BATCH_SECONDS (each list is one event for every view of the
    strip: one per image made a folder's open quadratic); at most `limit` entries; returns the counts."""
    readable = already = 0
    unreadable: list[tuple[str, str]] = []
    batch: list = []
    sent = time.monotonic()
    for path in expand_paths(paths):
        cancel.raise_if_cancelled()
        if same_path(path) in known:
            already += 1
            continue
        if limit is not None and readable + len(unreadable) >= limit:
            if batch:
                yield batch
            return Opened(readable, tuple(unreadable), already, limited=True)
        try:
            entry = make_entry(str(path), read_image(path))
            readable += 1
        except ImageReadError as exc:
            entry = make_entry(str(path), error=exc.reason)
            unreadable.append((str(path), exc.reason))
        batch.append(entry)
        if time.monotonic() - sent >= BATCH_SECONDS:
            yield batch
            batch, sent = [], time.monotonic()
    if batch:
        yield batch
    return Opened(readable, tuple(unreadable), already)


def _which(unreadable: tuple[tuple[str, str], ...], named: int = 3) -> str:
    """'a.jpg (truncated), b.heic (HEIC is not supported…)' for the first few, and how many more."""
    shown = ", ".join(f"{shown_path(os.path.basename(p))} ({why})" for p, why in unreadable[:named])
    more = len(unreadable) - named
    return shown + (f" and {more} more (the strip marks each)" if more > 0 else "")


def describe_open(paths: list[str], opened: Opened) -> tuple[str, str]:
    """(level, text) telling the user what an open did."""
    what = paths[0] if len(paths) == 1 else f"{len(paths)} items"
    if not opened.readable and not opened.already:
        if opened.unreadable:  # they are in the strip, marked: "Nothing opened" beside them read as a contradiction
            n = len(opened.unreadable)
            return "warning", (f"No image could be read from {what}: {_which(opened.unreadable)}. The strip marks "
                               f"{'it' if n == 1 else f'all {n}'} (right-click → Remove unreadable images).")
        return "warning", (f"No images in {what}: choose files or a folder holding .jpg, .png, .bmp, .webp or .tif "
                           "images (subfolders are searched too).")
    first = f"the first {counted(opened.readable, 'image')}" if opened.limited else counted(opened.readable, 'image')
    parts = [f"Opened {first} from {what}" + (" in the strip (the Folder tab shows every image of it)"
                                               if opened.limited else "")]
    if opened.already:
        parts.append(f"{opened.already} already in the strip")
    if opened.unreadable:
        parts.append(f"{len(opened.unreadable)} unreadable: {_which(opened.unreadable)}")
    return "info", "; ".join(parts) + "."


class Opening:
    """One open in progress: its images join the strip as they are read; at its end the window says what it did,
    remembers it, and selects the first new image (the selection stayed on an old one, the new ones out of
    sight)."""

    def __init__(self, window, paths: list[str]) -> None:
        self.window, self.paths, self.first = window, paths, None
        self.before = window.state.selected  # an image picked meanwhile stays picked

    def add(self, entries: list) -> None:
        added = self.window._add_entries(entries)
        if self.first is None:
            self.first = next((e for e in added if e.error is None), None)

    def done(self, opened: Opened) -> None:
        self.window._on_message(*describe_open(self.paths, opened))
        self.window.remember_recent(self.paths, opened=bool(opened.readable or opened.already))
        state = self.window.state
        if self.first is not None and self.first in state.images and state.selected in (self.before, self.first):
            state.select(self.first)
        self.window = None  # the job's callbacks hold this object: it holds no window after the open


def recent_entry(paths: list[str]) -> str:
    """One Open recent entry per open: a multi-open is one entry, its paths joined by newlines."""
    return "\n".join(str(p) for p in paths)


def updated_recent(recent: list[str], entry: str, opened: bool) -> list[str]:
    """The list with `entry` first when it opened, or taken out when it did not (moved, emptied, unreadable)."""
    rest = [r for r in recent if r != entry]
    return ([entry] + rest)[:RECENT_KEPT] if opened else rest


class StripPaths:
    """The paths in the strip, kept in step with the state's signals: a set lookup per image read instead of a
    scan of every image (a folder of 10k images would cost 10^8 comparisons)."""

    def __init__(self, state: AppState) -> None:
        self._count: Counter[str] = Counter(same_path(e.path) for e in state.images)
        state.images_added.connect(self._on_added)
        state.images_removed.connect(self._on_removed)

    def __contains__(self, path: str) -> bool:
        return self._count[same_path(path)] > 0

    def snapshot(self) -> frozenset[str]:
        return frozenset(p for p, n in self._count.items() if n > 0)

    def _on_added(self, entries) -> None:
        self._count.update(same_path(e.path) for e in entries)

    def _on_removed(self, entries) -> None:
        self._count.subtract(same_path(e.path) for e in entries)
