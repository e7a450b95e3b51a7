"""Image headers remembered per file, so a second scan of a folder reads no image it has already seen.

`scan_dataset` checks every file's header (`images.image_size`: a regular file, a format Pillow reads, within the
pixel limit) before anything runs: ~70 µs a file, 7 s of every command on 100k images (`audit`, `layers`,
`scores`, `finetune`, the Folder tab's open), run after run on files that did not change. The sizes are kept under
the user's cache folder (never in the dataset), one file per scanned folder or labels file, keyed by each file's
stat (size:mtime, inode:ctime: ctime changes with every write, so a file rewritten with its size and mtime restored
is read again). Only readable headers are kept: a file that failed is checked again every time (its reason may
have gone: a permission given back). The pixel limit is checked on every scan (it is a setting).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from vitstudio.core.data.images import check_pixels, image_size
from vitstudio.core.files import atomic_write_bytes, cache_dir, dataset_key, stat_keys

FORMAT = 1


class HeaderCache:
    """The remembered headers of one scanned folder (or labels file): `size(path)` as `image_size(path)`."""

    def __init__(self, scanned: str | Path) -> None:
        self.path = cache_dir() / "headers" / f"{dataset_key(scanned)}.json"
        self.known = self._read()
        self.seen: dict[str, list] = {}

    def _read(self) -> dict[str, list]:
        try:
            doc = json.loads(self.path.read_bytes())
        except (OSError, ValueError):  # none yet, unreadable or damaged: every header is read again
            return {}
        return doc.get("files", {}) if isinstance(doc, dict) and doc.get("format") == FORMAT else {}

    def size(self, path: Path) -> tuple[int, int]:
        """(width, height) of an image, from the cache where its stat is unchanged; raises ImageReadError as
        `image_size` does."""
        name, keys = str(path), stat_keys(path)
        entry = self.known.get(name)
        if keys is not None and isinstance(entry, list) and len(entry) == 4 and entry[:2] == list(keys):
            width, height = entry[2], entry[3]
            check_pixels(path, width, height)
        else:
            width, height = image_size(path)  # not a regular file (None): image_size says why
        if keys is not None:
            self.seen[name] = [*keys, width, height]
        return width, height

    def save(self) -> None:
        """Keep what this scan saw (files gone since drop out); a full disk or a read-only cache costs only speed."""
        if self.seen == self.known:
            return
        with contextlib.suppress(OSError):
            atomic_write_bytes(self.path, json.dumps({"format": FORMAT, "files": self.seen}).encode())
