"""Fixed-width rows on disk keyed by file content, shared safely by concurrent processes: the store under the
embedding cache (features + logits per image) and the perceptual-hash cache.

Keys. A file is known by its path, size and mtime (`key`), its inode and ctime (`ident`) and a BLAKE2b hash of all
of its bytes (`digest`). When size, mtime, inode and ctime all match, the row is served without reading the file;
otherwise the file is hashed and its row found by content (a file rewritten with its size and mtime restored by
`os.utime` has a new ctime, which no user call can set back, and different bytes: never served stale; a file
renamed or copied keeps its bytes: its row is reused without recomputing).

Index. `index.json` (a snapshot, written atomically) + `journal-<n>.jsonl` (one line per batch, appended and
fsynced): a batch of new rows costs a write proportional to the batch, not to the cache. The journal is folded
into a new snapshot when it holds more entries than the snapshot (amortised O(1) per row).

Concurrency. Every change runs under an exclusive `flock` on `lock` beside the index; it first reads what other
processes appended since (the journal's new lines, or the whole index after a snapshot was replaced), so rows
are appended at the true end and no two writers interleave. Readers take the lock shared. Crash safety: rows are
appended (and fsynced) before the journal line that counts them; under the lock, rows or a partial journal line
beyond the indexed end are leftovers of a crashed writer and are cut off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import stat
from pathlib import Path

import numpy as np

from vitstudio.core.files import die_at, naming, stat_keys

try:
    import fcntl
except ImportError:  # Windows: no flock; one writer at a time is then the user's business
    fcntl = None

FOLD_MIN = 4096  # journal entries kept before the first fold into the snapshot
MAX_ORPHANED = 0.25  # share of the rows left orphaned before a compaction drops them


def content_digest(path: str | Path) -> str:
    """BLAKE2b-128 of every byte of the file (~1 GB/s)."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


READ_BYTES = 16 << 20  # what `read_rows` maps at once


def read_rows(array: np.ndarray, rows: np.ndarray, columns: slice = slice(None)) -> np.ndarray:
    """array[rows, columns] in memory, read from a column's read-only memory map (`KeyedRows.arrays`) a few MB at
    a time, each step's pages let go once copied: reading some columns of every row touches every page of the file,
    and mapped pages stay in the process's resident set while the map lives (100k images × 4 blocks: +117 MB)."""
    rows = np.asarray(rows, np.int64)
    width = len(range(*columns.indices(array.shape[1])))
    out = np.empty((len(rows), width), array.dtype)
    step = max(1, READ_BYTES // max(1, array.shape[1] * array.itemsize))
    pages = array.base if isinstance(array, np.memmap) and isinstance(array.base, mmap.mmap) else None
    for lo in range(0, len(rows), step):
        out[lo:lo + step] = array[rows[lo:lo + step], columns]
        if pages is not None and hasattr(mmap, "MADV_DONTNEED"):  # a read-only shared map: pages refault from file
            pages.madvise(mmap.MADV_DONTNEED)
    return out


class RowView:
    """array[rows, columns] without copying them all: a memory-mapped cache read a few MB at a time, as asked
    (len, shape, slicing, index arrays; `take` narrows the rows without reading)."""

    def __init__(self, array: np.ndarray, rows: np.ndarray | None = None, columns: slice = slice(None)) -> None:
        self.array, self.columns = array, columns
        self.rows = np.arange(len(array)) if rows is None else np.asarray(rows, np.int64)
        self.shape = (len(self.rows), len(range(*columns.indices(array.shape[1]))))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> np.ndarray:
        if isinstance(index, (int, np.integer)):
            return np.asarray(self.array[self.rows[index], self.columns])
        return read_rows(self.array, self.rows[index], self.columns)  # a whole pass leaves the file unmapped

    def take(self, index) -> RowView:
        return RowView(self.array, self.rows[index], self.columns)


class KeyedRows:
    """Rows of fixed-width arrays (`columns`: file name -> dtype) in `folder`, one row per distinct content."""

    def __init__(self, folder: Path, columns: dict[str, str], meta: dict | None = None) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.columns = columns
        self.meta = meta or {}
        self._lock_file = open(self.folder / "lock", "a+b")  # noqa: SIM115 (held for the store's life)
        self._signature: object = "not loaded"
        self._pending: dict[str, list] = {}  # path -> entry found by content, journaled at the next write
        self._digests: dict[str, tuple[str, str, str]] = {}  # path -> (key, ident, digest) hashed this session
        with self.locked(exclusive=True):
            self._cut_leftovers()

    # -- locking and reading what others wrote --------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, exclusive: bool = False):
        if fcntl is not None:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            self._refresh()
            yield self
        finally:
            if fcntl is not None:
                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)

    def close(self) -> None:
        self._lock_file.close()

    def _refresh(self) -> None:
        """Catch up with the files: the whole index when the snapshot was replaced, else the journal's new lines."""
        path = self.folder / "index.json"
        signature = None
        if path.is_file():
            st = path.stat()
            signature = (st.st_ino, st.st_mtime_ns, st.st_size)
        if signature != self._signature:
            self._load_snapshot(path if signature else None)
            self._signature = signature
        self._read_journal()

    def _load_snapshot(self, path: Path | None) -> None:
        snap = json.loads(path.read_text()) if path is not None else {}
        if "journal" not in snap:  # none yet, or the older format without content hashes: start afresh
            snap = {"meta": self.meta, "rows": 0, "widths": {}, "files": {}, "journal": "journal-0.jsonl",
                    "data": 0}
        self.data = snap["data"]
        self._pending.clear()  # rows found in an older generation may have moved
        self.rows, self.widths, self.files = snap["rows"], dict(snap["widths"]), snap["files"]
        self.journal_name, self._offset, self.journal_entries = snap["journal"], 0, 0
        self.by_digest = {e[2]: e[3] for e in self.files.values()}
        self.snapshot_files = len(self.files)

    def _read_journal(self) -> None:
        journal = self.folder / self.journal_name
        if not journal.is_file():
            return
        with open(journal, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line without its newline is a crashed writer's: not counted
        for line in data[:end].splitlines():
            self._apply(json.loads(line))
        self._offset += end

    def _apply(self, record: dict) -> None:
        self.rows = max(self.rows, record.get("rows", 0))
        self.widths.update(record.get("widths", {}))
        for path, *entry in record["files"]:
            self.files[path] = entry
            self.by_digest[entry[2]] = entry[3]
        self.journal_entries += len(record["files"])

    def _cut_leftovers(self) -> None:
        """Under the exclusive lock: rows and journal bytes beyond what the index counts are a crash's."""
        for name, dtype in self.columns.items():
            path, width = self.path_of(name), self.widths.get(name, 0)
            size = self.rows * width * np.dtype(dtype).itemsize
            if path.exists() and path.stat().st_size > size:
                os.truncate(path, size)
        journal = self.folder / self.journal_name
        if journal.exists() and journal.stat().st_size > self._offset:
            os.truncate(journal, self._offset)

    # -- lookups ---------------------------------------------------------------------------------------------------
    def lookup(self, path: str | Path) -> int | None:
        """The row of this file's current content, or None (hashes the file unless its stat matches exactly)."""
        path = str(path)
        keys = stat_keys(path)
        if keys is None:
            return None
        key, ident = keys
        entry = self.files.get(path) or self._pending.get(path)
        if entry and entry[0] == key and entry[1] == ident:
            return entry[3]
        digest = self.digest(path, key, ident)
        row = self.by_digest.get(digest)
        if row is not None:  # same bytes as a known file (this one touched, renamed or copied): reuse its row
            self._pending[path] = [key, ident, digest, row]
        return row

    def lookup_readable(self, path: str | Path) -> int | None:
        """`lookup` for a file the reader can open: a FIFO is never hashed (it would block), nor a dangling link or a
        loop (the reader reports them)."""
        from vitstudio.core.data.images import ImageReadError, check_file

        try:
            check_file(path)
        except ImageReadError:
            return None
        return self.lookup(path)

    def lookup_many(self, paths: list) -> np.ndarray:
        """(N,) `lookup_readable` of each path, -1 where the store holds none: one stat per file whose stat matches
        its entry exactly (an opening from the cache: 100k files in ~0.3 s, where check_file + lookup stat each file
        five times); the rest go through `lookup_readable` (a FIFO never hashed, a changed file hashed)."""
        out = np.full(len(paths), -1, np.int64)
        files, pending = self.files, self._pending
        for i, p in enumerate(map(str, paths)):
            entry = files.get(p) or pending.get(p)
            try:
                st = os.stat(p) if entry else None
            except OSError:
                continue  # missing, a dangling link, a loop: nothing to serve
            if st is not None and stat.S_ISREG(st.st_mode) and entry[0] == f"{st.st_size}:{st.st_mtime_ns}" \
                    and entry[1] == f"{st.st_ino}:{st.st_ctime_ns}":
                out[i] = entry[3]  # readable when it was cached; a chmod since would have changed its ctime
            else:
                row = self.lookup_readable(p)
                out[i] = -1 if row is None else row
        return out

    def resolve(self, files: list[Path], known: tuple[int, np.ndarray] | None = None
                ) -> tuple[list[Path], np.ndarray, dict[str, np.ndarray]]:
        """(the files the store holds, their rows, every column's memory map), consistent with each other: read
        under the shared lock, so a compaction by another process cannot move the rows in between. `known`: (the
        data generation, `lookup_many(files)`) looked up just before: kept when no compaction has moved rows since
        (opening from the cache then stats each file once)."""
        self.flush()
        with self.locked():
            rows = known[1] if known is not None and known[0] == self.data else self.lookup_many(files)
            arrays = self.arrays()
        held = np.flatnonzero(rows >= 0)
        return [files[i] for i in held], rows[held], arrays

    def content_key(self, paths) -> str:
        """One digest of these files' names and contents (as their last lookups found them), in order: the key of a
        result computed from exactly these files (`resultcache.py`)."""
        pending, files = self._pending, self.files  # a file found by content is pending, newer
        text = "".join(f"{p}\0{(pending.get(p) or files.get(p) or (0, 0, '?'))[2]}\n" for p in map(str, paths))
        return hashlib.blake2b(os.fsencode(text), digest_size=16).hexdigest()  # one update: the same digest

    def digest(self, path: str, key: str | None = None, ident: str | None = None) -> str:
        if key is None:
            key, ident = stat_keys(path)
        known = self._digests.get(path)
        if known is None or known[:2] != (key, ident):
            known = (key, ident, content_digest(path))
            self._digests[path] = known
        return known[2]

    # -- writing ---------------------------------------------------------------------------------------------------
    def append(self, paths: list[str], values: dict[str, np.ndarray]) -> None:
        """New rows (one per path; `values`: column -> (len(paths), width) array) and their index entries."""
        entries = []
        for p in paths:
            keys = stat_keys(p)
            if keys is None:  # gone since it was read: an entry no lookup ever matches
                entries.append([str(p), "", "", f"gone:{p}"])
            else:
                entries.append([str(p), *keys, self.digest(str(p), *keys)])
        with self.locked(exclusive=True):
            self._cut_leftovers()
            widths = {}
            for name, dtype in self.columns.items():
                array = np.ascontiguousarray(values[name], dtype).reshape(len(paths), -1)
                if not self.widths.get(name):
                    widths[name] = self.widths[name] = int(array.shape[1])
                try:
                    with open(self.path_of(name), "ab") as f:
                        die_at("cache-append")
                        f.write(array.tobytes())
                        f.flush()
                        os.fsync(f.fileno())
                except OSError as exc:  # a full disk: the rows written in part are cut on the next open
                    raise naming(exc, self.path_of(name)) from None
            start = self.rows
            files = [e + [start + i] for i, e in enumerate(entries)] + self._take_pending()
            self._write_journal({"rows": start + len(paths), "widths": widths, "files": files})
            if self.journal_entries > max(FOLD_MIN, self.snapshot_files):  # doubling: amortised O(1)
                self._write_snapshot()

    def flush(self) -> None:
        """Journal the files found by content (touched, renamed or copied) so the next run skips their hash."""
        if self._pending:
            with self.locked(exclusive=True):
                self._cut_leftovers()
                self._write_journal({"files": self._take_pending()})

    def _take_pending(self) -> list:
        pending = [[p, *e] for p, e in self._pending.items()]
        self._pending.clear()
        return pending

    def _write_journal(self, record: dict) -> None:
        line = (json.dumps(record) + "\n").encode()
        with open(self.folder / self.journal_name, "ab") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._apply(record)
        self._offset += len(line)

    def path_of(self, column: str, data: int | None = None) -> Path:
        """The file of a column in a data generation (a compaction writes the next one beside the current)."""
        stem, dot, suffix = column.rpartition(".")
        return self.folder / f"{stem}-{self.data if data is None else data}{dot}{suffix}"

    def _write_snapshot(self, files: dict | None = None, rows: int | None = None, data: int | None = None) -> None:
        """Fold the journal into a new snapshot (atomic replace: the one moment the store changes), then start a
        fresh journal and delete what the old snapshot pointed to."""
        old_journal, old_data = self.journal_name, self.data
        number = int(old_journal.split("-")[1].split(".")[0]) + 1
        snap = {"meta": self.meta, "rows": self.rows if rows is None else rows, "widths": self.widths,
                "files": self.files if files is None else files, "journal": f"journal-{number}.jsonl",
                "data": self.data if data is None else data}
        tmp = self.folder / "index.json.tmp"
        tmp.write_text(json.dumps(snap))
        os.replace(tmp, self.folder / "index.json")
        stale = [self.folder / old_journal] + ([self.path_of(c, old_data) for c in self.columns]
                                                if snap["data"] != old_data else [])
        for path in stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self._refresh()

    def arrays(self) -> dict[str, np.ndarray]:
        """Every column as a read-only (rows, width) memory map (call under `locked()` with the lookups it serves:
        a map keeps the file it opened, so a later compaction elsewhere cannot move its rows)."""
        out = {}
        for name, dtype in self.columns.items():
            width = self.widths.get(name) or 1
            out[name] = (np.memmap(self.path_of(name), dtype, "r", shape=(self.rows, width)) if self.rows
                         else np.zeros((0, width), dtype))
        return out

    def compact(self) -> None:
        """Drop orphaned rows (contents no path holds any more, and the second copy two runs computed at once of the
        same content) once they exceed a quarter of the rows: two runs on an empty cache leave half the rows
        orphaned, which a majority rule never dropped. Each compaction follows at least rows/3 new orphans:
        amortised O(1) per row."""
        with self.locked(exclusive=True):
            live = sorted({e[3] for e in self.files.values()})
            if self.rows - len(live) <= self.rows * MAX_ORPHANED:
                return
            self._cut_leftovers()
            for name, values in self.arrays().items():  # the next generation's files; the index still says this one
                with open(self.path_of(name, self.data + 1), "wb") as f:
                    f.write(np.ascontiguousarray(values[live]).tobytes())
                    f.flush()
                    os.fsync(f.fileno())
            remap = {old: new for new, old in enumerate(live)}
            self._write_snapshot({p: e[:3] + [remap[e[3]]] for p, e in self.files.items()}, len(live),
                                 self.data + 1)
