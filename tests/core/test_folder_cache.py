"""The embedding cache at scale and under concurrency: keyed by content (a file rewritten with its size and mtime
restored is computed again; a renamed one is not), index writes proportional to the batch (not to the cache), and
two processes writing at once leave the cache one run would."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.core.generators import drain as run
from tests.core.synthetic_data import make_dataset
from vitstudio.core.analysis.embeddings import pooled_features
from vitstudio.core.folder import keyedstore
from vitstudio.core.folder.embedcache import EmbeddingCache, embed_folder
from vitstudio.core.folder.keyedstore import KeyedRows
from vitstudio.core.models.demo import bundled_demo
from vitstudio.core.models.loading import load_model

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo():
    return load_model(str(bundled_demo()))


def _feature(demo, path) -> np.ndarray:
    x = demo.to_tensor(demo.crop(Image.open(path).convert("RGB")))[None]
    return pooled_features(demo, x)[0][0]


def test_a_file_rewritten_with_size_and_mtime_kept_is_computed_again(demo, tmp_path):
    """A BMP rewritten with size and mtime restored is recomputed (content key), with features equal `pooled_features`.
    """
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):  # BMP: the same size in bytes whatever the pixels
        Image.fromarray(rng.integers(0, 255, (32, 32, 3)).astype(np.uint8)).save(data / f"{i}.bmp")
    first = run(embed_folder(demo, [str(data)]))
    target = data / "1.bmp"
    st = target.stat()
    Image.fromarray(rng.integers(0, 255, (32, 32, 3)).astype(np.uint8)).save(target)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    again = run(embed_folder(demo, [str(data)]))
    assert again.computed == 1
    got = again.features_of()[again.paths.index(str(target))]
    np.testing.assert_allclose(got, _feature(demo, target), atol=1e-5)
    assert not np.allclose(got, first.features_of()[first.paths.index(str(target))], atol=1e-3)


def test_renamed_and_touched_files_reuse_their_rows(demo, tmp_path):
    """Renamed and touched files reuse their rows (0 computed); a third run hashes nothing (content matches journalled).
    """
    data = make_dataset(tmp_path / "data", per_class=2)
    first = run(embed_folder(demo, [str(data)]))
    moved = data / "green" / "was-red.png"
    os.replace(data / "red" / "000.png", moved)
    os.utime(data / "blue" / "000.png")  # touched: new mtime, same bytes
    again = run(embed_folder(demo, [str(data)]))
    assert again.computed == 0 and len(again.paths) == 6
    np.testing.assert_array_equal(again.features_of()[again.paths.index(str(moved))],
                                  first.features_of()[first.paths.index(str(data / "red" / "000.png"))])
    # the content matches were journaled: a third run hashes nothing
    calls = []
    original = keyedstore.content_digest
    keyedstore.content_digest = lambda p: calls.append(p) or original(p)
    try:
        assert run(embed_folder(demo, [str(data)])).computed == 0
    finally:
        keyedstore.content_digest = original
    assert calls == []


def _fill(store: KeyedRows, folder: Path, names: list[str]) -> None:
    for name in names:
        (folder / name).write_bytes(name.encode())
    values = np.asarray([[len(n), sum(n.encode())] for n in names], np.float32)
    store.append([str(folder / n) for n in names], {"v.f32": values})


def test_index_writes_are_proportional_to_the_batch(tmp_path):
    """Appending 2 rows to a 20,000-row KeyedRows does not rewrite index.json, journal grows < 1 KB; reopened store has
    the rows and values.
    """
    files = tmp_path / "files"
    files.mkdir()
    store = KeyedRows(tmp_path / "store", {"v.f32": "float32"})
    _fill(store, files, [f"{i:05d}" for i in range(20_000)])
    assert store.rows == 20_000
    snapshot = (tmp_path / "store" / "index.json").stat()
    journal = store.folder / store.journal_name
    before = journal.stat().st_size if journal.exists() else 0
    _fill(store, files, ["new-a", "new-b"])
    after = (tmp_path / "store" / "index.json").stat()
    assert (after.st_ino, after.st_mtime_ns) == (snapshot.st_ino, snapshot.st_mtime_ns)  # not rewritten
    assert journal.stat().st_size - before < 1000  # two entries (the snapshot holds 20,000: ~4 MB)
    reopened = KeyedRows(tmp_path / "store", {"v.f32": "float32"})
    assert reopened.rows == 20_002 and reopened.lookup(files / "new-b") == 20_001
    np.testing.assert_array_equal(reopened.arrays()["v.f32"][20_001], [5, sum(b"new-b")])


WRITER = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from vitstudio.core.folder import keyedstore
    keyedstore.FOLD_MIN = 50  # fold the journal often: snapshots replaced under the other writer's feet
    store = keyedstore.KeyedRows(Path(sys.argv[2]), {"v.f32": "float32"})
    files = sorted(Path(sys.argv[3]).iterdir())
    print("ready", flush=True)  # imports done: the kill test times its kill from here
    for round in range(6):
        for start in range(0, len(files), 7):
            batch = files[start:start + 7]
            store.append([str(p) for p in batch], {"v.f32": np.asarray(
                [[float(p.name), len(p.read_bytes())] for p in batch], np.float32)})
        store.compact()
""")


def test_two_writer_processes_interleaving_leave_every_row_right(tmp_path):
    """Two processes append the same files again and again (journal folds and compactions included): every
    file's row holds its own values, and nothing is left beyond the indexed rows.

    [subprocess]
    """
    files = tmp_path / "files"
    files.mkdir()
    for i in range(300):
        (files / f"{i}").write_bytes(b"x" * (i % 17 + 1) + str(i).encode())
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(ROOT), str(tmp_path / "store"), str(files)])
             for _ in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    store = KeyedRows(tmp_path / "store", {"v.f32": "float32"})
    values = store.arrays()["v.f32"]
    for p in sorted(files.iterdir()):
        row = store.lookup(p)
        assert row is not None
        np.testing.assert_array_equal(values[row], [float(p.name), len(p.read_bytes())])
    assert store.path_of("v.f32").stat().st_size == store.rows * 2 * 4


def test_two_concurrent_embed_runs_leave_the_cache_one_run_would(demo, tmp_path, monkeypatch, forked_cli):
    """Two `vitstudio embed` processes started together on one cache (forked from a warm interpreter: two fresh ones
    spent ~10 s importing torch, the race is the same), batches of 2 so that their appends interleave.

    Two `vitstudio embed` processes started together on one cache (batches of 2): a later run computes nothing and
    features/logits equal a single run; index digests are the files' blake2b. [subprocess: forked warm]
    (`ForkedCli.run_together`; was two fresh interpreters)
    """
    data = make_dataset(tmp_path / "data", per_class=12)
    env = dict(os.environ, VITSTUDIO_CACHE_DIR=str(tmp_path / "shared"))
    runs = forked_cli.run_together([["embed", data, "--model", bundled_demo(), "--batch-size", 2, "--quiet"]] * 2, env)
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    single = run(embed_folder(demo, [str(data)], root=tmp_path / "single"))
    monkeypatch.setenv("VITSTUDIO_CACHE_DIR", str(tmp_path / "shared"))
    shared = run(embed_folder(demo, [str(data)]))
    assert shared.computed == 0 and shared.paths == single.paths
    np.testing.assert_allclose(shared.features_of(), single.features_of(), atol=1e-5)
    np.testing.assert_allclose(np.asarray(shared.logits[shared.rows]), np.asarray(single.logits[single.rows]),
                               atol=1e-4)
    cache = EmbeddingCache(demo)
    digest = {hashlib.blake2b(Path(p).read_bytes(), digest_size=16).hexdigest() for p in shared.paths}
    assert {e[2] for e in cache.index["files"].values()} == digest
    shutil.rmtree(tmp_path / "shared")


def test_two_runs_on_an_empty_cache_are_compacted_to_one_row_per_content(tmp_path):
    """Two stores (as two runs) each compute every file of an empty cache and append it: each content's second row
    orphans the first. The first compaction keeps one row per content, each holding its file's values (a majority
    rule kept all 2n rows: orphans were exactly half)."""
    files = tmp_path / "files"
    files.mkdir()
    names = [f"{i:03d}" for i in range(40)]
    first, second = (KeyedRows(tmp_path / "store", {"v.f32": "float32"}) for _ in range(2))
    _fill(first, files, names)
    _fill(second, files, names)  # looked up before the first run appended: computed again
    assert second.rows == 80
    second.compact()
    reopened = KeyedRows(tmp_path / "store", {"v.f32": "float32"})
    assert reopened.rows == 40
    rows = [reopened.lookup(files / n) for n in names]
    np.testing.assert_array_equal(reopened.arrays()["v.f32"][rows], [[len(n), sum(n.encode())] for n in names])


def test_fingerprints_are_cached_by_content(tmp_path, monkeypatch, photos):
    """Cached fingerprints equal fresh ones; second pass recomputes only the unreadable file; a rewrite with size/mtime
    restored is recomputed.
    """
    from vitstudio.core.folder import fingerprintcache
    from vitstudio.core.folder.fingerprints import fingerprints

    data = make_dataset(tmp_path / "data", per_class=3)
    shutil.copy(photos["coffee"], data / "red" / "coffee.jpg")
    (data / "red" / "broken.png").write_bytes(b"not an image")
    paths = sorted(str(p) for p in data.rglob("*.*"))
    want = fingerprints(paths)
    computed = []
    real = fingerprintcache.fingerprints
    monkeypatch.setattr(fingerprintcache, "fingerprints", lambda ps: computed.extend(ps) or real(ps))

    def same(got) -> None:
        for name in ("index", "bits", "mirror_bits", "thumbs", "mirror_thumbs"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        assert got.errors == want.errors

    same(fingerprintcache.cached_fingerprints(paths))
    assert len(computed) == len(paths)
    computed.clear()
    same(fingerprintcache.cached_fingerprints(paths))  # a second audit: only the unreadable file is tried again
    assert computed == [str(data / "red" / "broken.png")]
    target = data / "blue" / "001.png"  # rewritten, size and mtime restored: computed again
    st = target.stat()
    Image.open(data / "blue" / "002.png").save(target)
    target.write_bytes(target.read_bytes()[: st.st_size].ljust(st.st_size, b"\0"))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    computed.clear()
    got = fingerprintcache.cached_fingerprints(paths)
    assert str(target) in computed
    want = fingerprints(paths)
    same(got)


def test_a_writer_killed_at_any_instant_leaves_a_consistent_cache(tmp_path):
    """SIGKILL a writer at random instants (mid-append, mid-journal line, mid-fold or mid-compaction): every file
    the index names still has its own values, and a new writer carries on.

    SIGKILL a writer at 10 random instants timed from its "ready" line (≥ 6 land mid-write; the old 1–4 s sleeps mostly
    killed a finished writer): store size matches rows and every indexed file has its own values. [subprocess]
    """
    import random
    import time

    files = tmp_path / "files"
    files.mkdir()
    for i in range(300):
        (files / f"{i}").write_bytes(b"y" * (i % 13 + 1) + str(i).encode())
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = random.Random(0)
    landed = 0
    for _ in range(10):
        proc = subprocess.Popen([sys.executable, str(script), str(ROOT), str(tmp_path / "store"), str(files)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        # its appends, folds and compactions take ~0.4 s here (a fixed 1-4 s sleep mostly killed a finished writer)
        time.sleep(rng.uniform(0.0, 0.2))
        landed += proc.poll() is None
        proc.kill()
        proc.wait()
        proc.stdout.close()
        store = KeyedRows(tmp_path / "store", {"v.f32": "float32"})
        values = store.arrays()["v.f32"]
        assert store.rows == 0 or store.path_of("v.f32").stat().st_size == store.rows * 2 * 4
        for path, entry in store.files.items():
            np.testing.assert_array_equal(values[entry[3]], [float(Path(path).name), len(Path(path).read_bytes())])
        store.close()
    assert landed >= 6  # most kills landed while it was writing


def test_a_fifo_or_a_vanished_file_is_never_opened_by_a_lookup(tmp_path):
    """Lookup of a FIFO or a missing file returns None without blocking."""
    store = KeyedRows(tmp_path / "store", {"v.f32": "float32"})
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes
    assert store.lookup(fifo) is None and store.lookup(tmp_path / "missing.png") is None


def _mapped_kb(path: Path) -> int:
    """Resident kB of this process's mappings of `path` (Linux's /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):  # a mapping's header: its address range … its file
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")
def test_reading_a_column_of_every_row_leaves_the_map_unresident(tmp_path, monkeypatch):
    """`read_rows` equals the memory map's own indexing, and the pages it touched are no longer in the process's
    resident set (plain indexing of a block of every row keeps the whole file resident while the map lives).

    `keyedstore.read_rows` equals the memory map's own indexing (some columns of 6,000 shuffled rows of a 32 MB file)
    and leaves < 2 MB of the file resident in the process (Linux's /proc/self/smaps), where plain indexing leaves > 16
    MB.
    """
    path = tmp_path / "features.f32"
    data = np.random.default_rng(0).random((8192, 1024), dtype=np.float32)  # 32 MB, 4 blocks of 256
    data.tofile(path)
    array = np.memmap(path, np.float32, "r", shape=data.shape)
    rows = np.random.default_rng(1).permutation(len(data))[:6000]
    monkeypatch.setattr(keyedstore, "READ_BYTES", 1 << 20)
    ours = keyedstore.read_rows(array, rows, slice(256, 512))
    assert np.array_equal(ours, data[rows, 256:512]) and ours.flags.writeable
    assert _mapped_kb(path) < 2048
    plain = np.asarray(array[rows, 256:512])
    assert np.array_equal(plain, ours) and _mapped_kb(path) > 16 * 1024  # what it avoids
