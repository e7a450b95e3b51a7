"""The folder audit's model-free fingerprints (`fingerprints.py`: perceptual hashes and thumbnails, each also of
the mirrored image), cached on disk like the features: keyed by file content (`keyedstore.py`), so a second audit
of a folder decodes and hashes nothing it has seen, and concurrent audits share the cache under its lock. An audit
with a model computes them from the embedding pass's decode (`FingerprintRider`): each image is decoded once.

One cache for every model (fingerprints depend only on the bytes) under the user's cache folder:
`<cache>/fingerprints/<FORMAT>/`, 16 bytes of packed hash bits + 512 float32 of thumbnails per image. Bump FORMAT
when `fingerprints.py` computes anything differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vitstudio.core.data.images import ImageReadError, check_file
from vitstudio.core.folder.embedcache import embeddings_root
from vitstudio.core.folder.fingerprints import HASH_BITS, Fingerprints, fingerprint, fingerprints
from vitstudio.core.folder.keyedstore import KeyedRows, RowView, read_rows

FORMAT = "v1"
CHUNK = 256  # images fingerprinted between two appends: an interrupted audit keeps what it computed
COLUMNS = {"bits.u8": "uint8", "thumbs.f32": "float32"}


def fingerprints_root() -> Path:
    return embeddings_root().parent / "fingerprints" / FORMAT


def _known(store: KeyedRows, path: str) -> bool:
    try:
        check_file(path)  # never hash a FIFO (it would block) or a dangling link: the reader reports them
    except ImageReadError:
        return False
    return store.lookup(path) is not None


def _append(store: KeyedRows, paths: list[str], parts: list[tuple]) -> None:
    """Rows of fingerprints: `parts` (bits, mirrored bits, thumbnail, mirrored thumbnail) per path."""
    bits, mbits, thumbs, mthumbs = (np.stack(p) for p in zip(*parts))
    store.append(paths, {"bits.u8": np.packbits(np.concatenate([bits, mbits], 1), axis=1),  # (n, 16)
                         "thumbs.f32": np.concatenate([thumbs, mthumbs], 1)})


class FingerprintRider:
    """Fingerprints of the images a folder pass decodes anyway (`embedcache.fill(alongside=...)`), for the files the
    cache lacks: computed on the reader threads from the decoded image (`fingerprint`, as `fingerprints` does),
    appended per batch. `cached_fingerprints` then finds them, so an audit decodes each image once."""

    image_fn = staticmethod(fingerprint)  # what a cluster's decode stage computes for the files `wanted`

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self.store: KeyedRows | None = None
        self.wanted: frozenset[str] = frozenset()

    def expect(self, paths: list) -> None:
        """The files the pass will decode (nothing opened when there are none: a warm pass costs nothing)."""
        if paths:
            self.store = KeyedRows(self.root or fingerprints_root(), COLUMNS, {"format": FORMAT})
            paths = [str(p) for p in paths]
            self.wanted = frozenset(p for p, row in zip(paths, self.store.lookup_many(paths)) if row < 0)

    def __call__(self, path: str, image) -> tuple | None:  # on the reader threads: reads only `wanted`
        return fingerprint(image) if path in self.wanted else None

    def take(self, extra: dict[str, tuple | None]) -> None:
        done = [(p, v) for p, v in extra.items() if v is not None]
        if done and self.store is not None:
            _append(self.store, [p for p, _ in done], [v for _, v in done])

    def close(self) -> None:
        if self.store is not None:
            self.store.flush()
            self.store.close()


def cached_fingerprints(paths: Sequence[str], root: Path | None = None) -> Fingerprints:
    """`fingerprints(paths)`, computing only the files whose content the cache does not hold."""
    paths = [str(p) for p in paths]
    store = KeyedRows(root or fingerprints_root(), COLUMNS, {"format": FORMAT})
    try:
        todo = [p for p in paths if not _known(store, p)]
        errors: dict[str, str] = {}
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start:start + CHUNK]
            fp = fingerprints(chunk)
            errors.update(fp.errors)
            if len(fp.index):
                _append(store, [chunk[k] for k in fp.index],
                        list(zip(fp.bits, fp.mirror_bits, fp.thumbs, fp.mirror_thumbs)))
        store.flush()
        with store.locked():  # rows and arrays read together (a compaction elsewhere cannot move them between)
            index, rows = [], []
            for k, p in enumerate(paths):
                row = None if p in errors else store.lookup(p)
                if row is not None:
                    index.append(k)
                    rows.append(row)
            arrays = store.arrays()  # the maps keep the files they opened: a compaction elsewhere cannot move them
            bits = np.unpackbits(read_rows(arrays["bits.u8"], rows), axis=1).astype(bool)
            thumbs = arrays["thumbs.f32"]
    finally:
        store.close()
    listed = tuple((p, errors[p]) for p in paths if p in errors)
    if not rows:
        empty = fingerprints([])
        return Fingerprints(empty.index, empty.bits, empty.mirror_bits, empty.thumbs, empty.mirror_thumbs, listed)
    half = thumbs.shape[1] // 2  # the thumbnails stay on disk, read as the pairs and the calibration ask (2 KB each)
    return Fingerprints(np.asarray(index, np.int64), bits[:, :HASH_BITS], bits[:, HASH_BITS:],
                        RowView(thumbs, rows, slice(0, half)), RowView(thumbs, rows, slice(half, None)), listed)
