"""Sorting into folders under faults: a sort SIGKILLed at random instants (copy, move, move across filesystems) is
finished by rerunning `vitstudio sort` without a duplicate, and `vitstudio undo-sort` then restores the source byte
for byte; undo keeps (and lists) a copy edited since the sort and removes the folders it created; an output folder
inside its source is refused; a move from a read-only source fails per file, journalled, nothing left behind; a
label-review move journals in the app's data folder, never in the dataset."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.core.generators import drain as run
from tests.core.synthetic_data import tree_state
from vitstudio.core.folder import fileops
from vitstudio.core.folder.sorting import (
    NestedFoldersError,
    apply_sort,
    check_out_folder,
    journal_dir,
    plan_sort,
    prepare_sort,
    undo_sort,
)
from vitstudio.core.models.demo import bundled_demo

ROOT = Path(__file__).resolve().parents[2]


def _noise_images(root: Path, n: int, size: int = 96, seed: int = 0) -> Path:
    """n incompressible PNGs (~28 KB each) in two folders, the same names in both (clashes in the output)."""
    rng = np.random.default_rng(seed)
    for k in range(n):
        folder = root / ("a" if k % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(folder / f"{k // 2:04d}.png")
    return root


def _digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _file_state(root: Path) -> dict[str, tuple[int, int]]:
    return {k: v for k, v in tree_state(root).items() if (root / k).is_file()}


def _placed(out: Path) -> list[str]:
    """Hashes of every file in the output but the journals, sorted (a multiset: duplicates show)."""
    return sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in out.rglob("*")
                  if p.is_file() and not p.name.startswith("vitstudio-sort-"))


def _fake_plan(src: Path, out: Path, move: bool = False):
    files = sorted(p for p in src.rglob("*.png"))
    return plan_sort([(str(p), str(k % 3), 1.0) for k, p in enumerate(files)], out, move=move)


def _cross_fs_dir(tmp_path: Path) -> Path | None:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shm.stat().st_dev != tmp_path.stat().st_dev:
        return shm
    return None


# -- the kill test -----------------------------------------------------------------------------------------------
def test_sort_killed_at_random_instants_resumes_without_duplicates_and_undoes(tmp_path, monkeypatch):
    """20 trials: the file operations of a sort (copy; move; move across filesystems) run in a subprocess
    (`vitstudio sort --resume LOG`, the same code a plain `sort` runs after planning) and are SIGKILLed after a random
    number of files plus a random fraction of the next; the plain `vitstudio sort` is rerun, then `undo-sort`.

    [subprocess]
    """
    from vitstudio.cli import app, main

    parser = app.build_parser()  # main() builds it at every call (~11 ms, once a process for a user): 40 calls here
    monkeypatch.setattr(app, "build_parser", lambda: parser)  # share one (each parse makes a Namespace of its own)
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.models.loading import load_model

    src = _noise_images(tmp_path / "src", 160)
    original, original_state = _digests(src), _file_state(src)
    demo_path = str(bundled_demo())
    demo = load_model(demo_path)
    result = run(embed_folder(demo, [str(src)]))  # also warms the cache the reruns read
    probs = result.probabilities()
    preds = [(p, demo.labels[int(probs[i].argmax())], float(probs[i].max())) for i, p in enumerate(result.paths)]
    shm, rng, seen = _cross_fs_dir(tmp_path), np.random.default_rng(19), []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        for trial in range(20):
            move = trial % 2 == 1
            base = shm / f"vitstudio-kill-{os.getpid()}" if (move and trial % 4 == 3 and shm) else tmp_path
            out = base / f"out{trial}"
            log = prepare_sort(plan_sort(preds, out, move=move))
            stop_after = int(rng.integers(0, len(preds)))
            proc = subprocess.Popen([sys.executable, "-m", "vitstudio", "sort", "--resume", str(log)], env=env,
                                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while proc.poll() is None and log.read_text().count('"op": "intent"') < stop_after:
                time.sleep(0.0005)
            time.sleep(float(rng.uniform(0, 0.003)))
            finished = proc.poll() is not None
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            records = [json.loads(x) for x in log.read_text().splitlines() if x.endswith("}")]
            intents = sum(r["op"] == "intent" for r in records)
            outcomes = sum(r["op"] in ("done", "failed") for r in records)
            parts = len(list(out.rglob(f"*{fileops.PART_SUFFIX}")))
            seen.append((trial, "move" if move else "copy", "x-fs" if base != tmp_path else "", finished, intents,
                         intents - outcomes, parts))
            args = ["sort", str(src), "--model", demo_path, "--out", str(out), "--quiet"] + (["--move"] * move)
            assert main(args) == 0, seen[-1]
            assert _placed(out) == sorted(original.values()), seen[-1]  # every image once, byte for byte
            assert not list(out.rglob(f"*{fileops.PART_SUFFIX}")) and len(list(journal_dir(out).glob("*.jsonl"))) == 1
            assert (_file_state(src) == original_state) if not move else not list(src.rglob("*.png"))
            assert main(["undo-sort", str(log)]) == 0, seen[-1]
            assert _digests(src) == original and _file_state(src) == original_state, seen[-1]  # byte for byte
            assert list(out.rglob("*")) == [] and log.with_suffix(".undone").is_file()  # class folders removed
    finally:
        if shm:
            shutil.rmtree(shm / f"vitstudio-kill-{os.getpid()}", ignore_errors=True)
        print("\n(trial, action, fs, ran to the end, intents at the kill, pending, partial files)")
        print("\n".join(map(str, seen)))
    assert sum(not s[3] for s in seen) >= 15  # the kills landed inside the file operations
    assert sum(s[5] > 0 for s in seen) >= 3  # and some between an intent and its outcome


def test_resume_imports_no_torch(tmp_path):
    """`sort --resume LOG` is file operations only: it finishes the sort without importing torch or timm (a resume
    starts in ~0.1 s, and the kill test above starts 20 of them).

    [subprocess]
    """
    src = _noise_images(tmp_path / "src", 3)
    log = prepare_sort(_fake_plan(src, tmp_path / "out"))
    code = ("import sys; from vitstudio.cli import main; code = main(['sort', '--resume', sys.argv[1]]); "
            "print(sorted(m for m in ('torch', 'timm') if m in sys.modules)); sys.exit(code)")
    res = subprocess.run([sys.executable, "-c", code, str(log)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]"
    assert len(list((tmp_path / "out").rglob("*.png"))) == 3


# -- undo never destroys -----------------------------------------------------------------------------------------
def test_undo_keeps_an_edited_copy_lists_it_and_removes_empty_folders(tmp_path):
    """Undo removes 8 copies, keeps and lists the edited one, removes only empty class folders; source intact."""
    src = _noise_images(tmp_path / "src", 9)
    original = _digests(src)
    out = tmp_path / "out"
    done = apply_sort(_fake_plan(src, out))
    assert done.done == 9 and not done.errors
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["0", "1", "2"]
    edited = next((out / "1").iterdir())
    edited.write_bytes(edited.read_bytes() + b"the user's edit")
    undo = undo_sort(done.log)
    assert undo.kept == (str(edited),) and undo.removed == 8 and not undo.problems
    assert edited.read_bytes().endswith(b"the user's edit")  # kept
    assert {Path(f).name for f in undo.folders_removed} == {"0", "2"} and undo.folders_kept == (str(out / "1"),)
    text = undo.describe()
    assert str(edited) in text and "changed since the sort" in text and "Undid 8 files" in text
    assert _digests(src) == original


def test_undo_cli_lists_the_kept_copy(tmp_path, capsys):
    """`undo-sort LOG` stderr names the kept edited copy and "Undid 3 files"."""
    from vitstudio.cli import main

    src = _noise_images(tmp_path / "src", 4)
    done = apply_sort(_fake_plan(src, tmp_path / "out"))
    victim = Path(json.loads([x for x in Path(done.log).read_text().splitlines() if '"done"' in x][0])["target"])
    victim.write_bytes(b"edited")
    assert main(["undo-sort", done.log]) == 0
    err = capsys.readouterr().err
    assert f"kept {victim}" in err and "Undid 3 files" in err and victim.read_bytes() == b"edited"


def test_rerun_of_a_finished_copy_sort_makes_no_duplicates(tmp_path):
    """Applying the same copy plan again copies nothing."""
    src = _noise_images(tmp_path / "src", 6)
    out = tmp_path / "out"
    first = apply_sort(_fake_plan(src, out))
    second = apply_sort(_fake_plan(src, out))
    assert first.done == 6 and second.done == 0 and len(_placed(out)) == 6


# -- refused and failing cleanly ---------------------------------------------------------------------------------
def test_output_inside_the_source_is_refused(tmp_path, capsys):
    """Output inside the source (or equal, or source inside output) raises NestedFoldersError and CLI exit 2 "inside";
    siblings allowed; nothing written.
    """
    from vitstudio.cli import main

    src = _noise_images(tmp_path / "src", 4)
    state = tree_state(src)
    for out in (src / "sorted", src / "a" / "deeper", src):
        with pytest.raises(NestedFoldersError):
            check_out_folder([src], out)
        assert main(["sort", str(src), "--model", str(bundled_demo()), "--out", str(out)]) == 2
        assert "inside" in capsys.readouterr().err
    with pytest.raises(NestedFoldersError):  # and the source inside the output
        check_out_folder([src / "a"], src)
    check_out_folder([src / "a"], src / "b")  # siblings are fine
    assert tree_state(src) == state  # nothing written


def test_move_from_a_read_only_source_fails_per_file_and_leaves_nothing(tmp_path, monkeypatch):
    """Moves from a read-only subfolder fail per file ("read-only"), journalled as failed; the others move; undo moves
    them back.
    """
    src = _noise_images(tmp_path / "src", 6)
    original, out = _digests(src), tmp_path / "out"
    monkeypatch.setattr(fileops, "source_folder_writable", lambda path: not str(path).startswith(str(src / "a")))
    done = apply_sort(_fake_plan(src, out, move=True))
    assert done.done == 3 and len(done.errors) == 3 and all("read-only" in r for _, r in done.errors)
    assert "Moved 3 images; 3 failed" in done.describe()
    assert len(_placed(out)) == 3 and len(list((src / "a").iterdir())) == 3 and not list((src / "b").iterdir())
    records = [json.loads(x) for x in Path(done.log).read_text().splitlines()]
    assert sum(r["op"] == "failed" for r in records) == 3
    assert undo_sort(done.log).moved_back == 3 and _digests(src) == original


def test_move_across_filesystems_whose_original_cannot_be_removed_takes_the_copy_back(tmp_path, monkeypatch):
    """The folder looks writable but removing fails (EROFS, a network share): each file fails alone, no copy left."""
    src = _noise_images(tmp_path / "src", 4)
    original, out = _digests(src), tmp_path / "out"
    real_rename, real_unlink = os.rename, os.unlink

    def rename(a, b):
        if str(a).startswith(str(src)):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_rename(a, b)

    def unlink(p):
        if str(p).startswith(str(src)):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_unlink(p)

    with monkeypatch.context() as patched:
        patched.setattr(os, "rename", rename)
        patched.setattr(os, "unlink", unlink)
        done = apply_sort(_fake_plan(src, out, move=True))
    assert done.done == 0 and len(done.errors) == 4 and all("copy was taken back" in r for _, r in done.errors)
    assert _placed(out) == [] and _digests(src) == original
    assert not list(out.rglob(f"*{fileops.PART_SUFFIX}"))


def test_move_across_real_filesystems_and_back(tmp_path):
    """Move to /dev/shm and undo restore the source exactly (skipped without a second filesystem)."""
    shm = _cross_fs_dir(tmp_path)
    if shm is None:
        pytest.skip("no second filesystem here")
    src = _noise_images(tmp_path / "src", 6)
    original = _digests(src)
    out = shm / f"vitstudio-xfs-{os.getpid()}"
    try:
        done = apply_sort(_fake_plan(src, out, move=True))
        assert done.done == 6 and not list(src.rglob("*.png")) and len(_placed(out)) == 6
        undo = undo_sort(done.log)
        assert undo.moved_back == 6 and not undo.problems and _digests(src) == original
    finally:
        shutil.rmtree(out, ignore_errors=True)


# -- label-review moves ------------------------------------------------------------------------------------------
def test_review_move_journals_outside_the_dataset_and_undoes(tmp_path):
    """A label-review move journals in the app's data folder, writes only the moved file, and undo restores and removes
    the new folder.
    """
    data = _noise_images(tmp_path / "data", 4)
    original = _digests(data)
    path = str(sorted((data / "a").iterdir())[0])
    plan = plan_sort([(path, "seven", 1.0)], data, move=True)
    done = apply_sort(plan, kind="review-move")
    assert Path(done.log).parent == journal_dir(data) and data not in Path(done.log).parents and done.done == 1
    assert sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file()) == sorted(
        [k for k in original if k != f"a/{Path(path).name}"] + [f"seven/{Path(path).name}"])  # nothing else written
    undo = undo_sort(done.log)
    assert undo.moved_back == 1 and undo.folders_removed == (str(data / "seven"),)
    assert _digests(data) == original and sorted(p.name for p in data.iterdir()) == ["a", "b"]


# -- old logs, a second process, an interrupted undo -------------------------------------------------------------
def test_an_old_log_undoes_without_destroying_an_edit(tmp_path):
    """Logs written before the journal (one line per finished file, no hash): a copy goes only if it still has the
    original's bytes."""
    src = _noise_images(tmp_path / "src", 3)
    out = tmp_path / "out" / "x"
    out.mkdir(parents=True)
    lines = []
    for k, p in enumerate(sorted(src.rglob("*.png"))):
        shutil.copy2(p, out / f"{k}.png")
        lines.append(json.dumps({"action": "copy", "source": str(p), "target": str(out / f"{k}.png"), "label": "x"}))
    (out / "1.png").write_bytes(b"edited")
    log = tmp_path / "out" / "vitstudio-sort-old.jsonl"
    log.write_text("\n".join(lines) + "\n")
    undo = undo_sort(log)
    assert undo.removed == 2 and undo.kept == (str(out / "1.png"),) and (out / "1.png").read_bytes() == b"edited"


def test_a_second_process_on_the_same_journal_is_refused(tmp_path):
    """With the journal locked, `undo-sort` exits 2 "another sort or undo" and `apply_sort` raises JournalBusy; after
    release it runs. [subprocess]
    """
    from vitstudio.core.folder import journal

    src = _noise_images(tmp_path / "src", 2)
    log = prepare_sort(_fake_plan(src, tmp_path / "out"))
    with journal.locked(log):
        proc = subprocess.run([sys.executable, "-m", "vitstudio", "undo-sort", str(log)], cwd=ROOT,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 2 and "another sort or undo" in proc.stderr
        with pytest.raises(journal.JournalBusy):
            apply_sort(_fake_plan(src, tmp_path / "out"))
    assert apply_sort(_fake_plan(src, tmp_path / "out")).done == 2


def test_an_undo_killed_at_random_instants_finishes_on_rerun(tmp_path):
    """4 undos SIGKILLed at random instants finish on rerun with no problems or kept files; source restored, output
    empty. [subprocess]
    """
    src = _noise_images(tmp_path / "src", 120)
    original, rng = _digests(src), np.random.default_rng(5)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for trial in range(4):
        out = tmp_path / f"out{trial}"
        log = Path(apply_sort(_fake_plan(src, out, move=trial % 2 == 1)).log)
        proc = subprocess.Popen([sys.executable, "-m", "vitstudio", "undo-sort", str(log)], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stop_after = int(rng.integers(1, 120))
        while proc.poll() is None and log.exists() and log.read_text().count('"op": "undone"') < stop_after:
            time.sleep(0.0005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if log.exists():
            undo = undo_sort(log)
            assert not undo.problems and not undo.kept
        assert _digests(src) == original and list(out.iterdir()) == [] and log.with_suffix(".undone").is_file()


def test_an_undo_of_one_file_says_one_file():
    """The Folder tab's undo line said "Undid 1 files (1 copies removed, …); removed 1 empty folders": the counts
    take their singular at one."""
    from vitstudio.core.folder.undo import UndoResult

    one = UndoResult("sort.jsonl", removed=1, moved_back=0, kept=("a.jpg",), folders_removed=("cats",),
                     folders_kept=("dogs",), problems=())
    assert one.describe().splitlines()[:2] + [one.describe().splitlines()[3]] == [
        "Undid 1 file (1 copy removed, 0 moved back); removed 1 empty folder the sort had created.",
        "Kept 1 copy changed since the sort (they are yours now):",
        "Left 1 folder the sort had created, not empty:"]
    two = UndoResult("sort.jsonl", removed=2, moved_back=1, kept=(), folders_removed=(), folders_kept=(), problems=())
    assert two.describe().startswith("Undid 3 files (2 copies removed, 1 moved back); removed 0 empty folders")
