"""Files where users expect them (issue 21, item 8): the platform's data and cache folders (the XDG base directory
spec on Linux, written out here as the reference), their overrides, runs named in the models folder by
`finetune` without --out, the checkout's models still listed, and what the app remembers (settings, exclusions)
kept in its data folder, never in the dataset."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from tests.core.generators import drain
from tests.core.synthetic_data import make_dataset, tree_state
from vitstudio.core import files as paths

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the XDG base directory spec is Linux's")


@pytest.fixture
def platform_folders(tmp_path, monkeypatch):
    """No ViT Studio overrides: the platform's folders, with XDG_* and HOME pointed into tmp_path."""
    for name in (paths.DATA_ENV, paths.MODELS_ENV, paths.CACHE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    return tmp_path


@linux_only
def test_folders_follow_xdg_and_the_overrides_win(platform_folders, monkeypatch):
    """cache/data/models dirs follow $XDG_* and the spec's HOME defaults; VITSTUDIO_DATA/CACHE/MODELS overrides win;
    reference: XDG base directory spec. [Linux only]
    """
    tmp = platform_folders
    assert paths.cache_dir() == tmp / "xdg-cache" / "vitstudio"  # $XDG_CACHE_HOME/<app>
    assert paths.data_dir() == tmp / "xdg-data" / "vitstudio"  # $XDG_DATA_HOME/<app>
    assert paths.models_dir() == tmp / "xdg-data" / "vitstudio" / "models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("XDG_DATA_HOME")
    assert paths.cache_dir() == tmp / "home" / ".cache" / "vitstudio"  # the spec's defaults
    assert paths.data_dir() == tmp / "home" / ".local" / "share" / "vitstudio"
    monkeypatch.setenv(paths.DATA_ENV, str(tmp / "portable"))
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp / "scratch"))
    assert paths.models_dir() == tmp / "portable" / "models" and paths.cache_dir() == tmp / "scratch"
    monkeypatch.setenv(paths.MODELS_ENV, str(tmp / "mine"))
    assert paths.models_dir() == tmp / "mine"


@linux_only
def test_every_cache_honours_xdg_cache_home(platform_folders, photos):
    """Embeddings, fingerprints and decoded images all land under $XDG_CACHE_HOME/vitstudio; nothing in HOME.

    embeddings, fingerprints and decoded images land under $XDG_CACHE_HOME/vitstudio; nothing in HOME. [Linux only]
    """
    from vitstudio.core.data.imagecache import build_cache
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.folder.fingerprintcache import cached_fingerprints
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    files = [str(p) for p in photos.values()]
    drain(embed_folder(load_model(str(bundled_demo())), files))
    cached_fingerprints(files)
    drain(build_cache([Path(f) for f in files], 32, memory_budget=0))  # too big for memory: written to disk
    cache = platform_folders / "xdg-cache" / "vitstudio"
    assert sorted(p.name for p in cache.iterdir()) == ["decoded", "embeddings", "fingerprints"]
    assert all(any(p.is_file() for p in (cache / name).rglob("*")) for name in ("decoded", "embeddings"))
    assert not (platform_folders / "home").exists()


def test_finetune_without_out_names_a_run_in_the_models_folder(tmp_path, monkeypatch, capsys):
    """As the app names runs: DATASET-PRESET-MMDD-HHMM in the user's models folder (here the data folder's, since
    no VITSTUDIO_MODELS_DIR is set); a second run the same minute gets a fresh name; nothing beside the package.

    [fine-tune]
    """
    from vitstudio.cli import main

    monkeypatch.delenv(paths.MODELS_ENV)
    checkout = tree_state(paths.CHECKOUT_ROOT / "models") if (paths.CHECKOUT_ROOT / "models").is_dir() else {}
    data = make_dataset(tmp_path / "colours", per_class=6)
    spec = TINY_SPEC.replace("classes=5", "classes=3")
    args = ["finetune", str(data), "--model", spec, "--preset", "scratch", "--epochs", "1", "--batch-size", "8",
            "--quiet"]
    assert main(args) == 0 and main(args) == 0
    models = Path(os.environ[paths.DATA_ENV]) / "models"
    runs = sorted(models.iterdir())
    assert len(runs) == 2 and all((r / "model.safetensors").is_file() for r in runs)
    assert all(re.fullmatch(r"colours-scratch-\d{4}-\d{4}(-2)?", r.name) for r in runs), runs
    assert f"Run folder: {runs[0]}" in capsys.readouterr().err
    after = tree_state(paths.CHECKOUT_ROOT / "models") if checkout else {}
    assert after == checkout and not list(data.rglob("*.safetensors"))


def test_catalog_lists_the_users_models_and_the_checkouts(tmp_path):
    """The user's models folder is listed locally, before the checkout's digits-vit, which `local_folder` finds by name.
    """
    from vitstudio.core.models.catalog import list_catalog
    from vitstudio.core.models.loading import local_folder

    mine = Path(os.environ[paths.MODELS_ENV]) / "my-vit"
    mine.mkdir()
    (mine / "model.safetensors").write_bytes(b"")
    names = [e.name for e in list_catalog(local_only=True) if e.source == "local"]
    assert str(mine) in names
    checkout = paths.checkout_models_dir()
    if checkout is not None and (checkout / "digits-vit").is_dir():  # a source checkout: the demo still listed
        assert str(checkout / "digits-vit") in names and names.index(str(mine)) < names.index(
            str(checkout / "digits-vit"))
        assert local_folder("digits-vit") == checkout / "digits-vit"  # and found by its name



@pytest.mark.parametrize("layout", ["lib/python3.11/site-packages", "Lib/site-packages"])
def test_an_installed_wheels_demo_is_listed_and_named_as_in_a_checkout(tmp_path, monkeypatch, layout):
    """A wheel's demo sits in <prefix>/share/vitstudio/models (pyproject's data-files) with no checkout around the
    package (POSIX and Windows site-packages under a `--prefix`/`--user` prefix): listed, and `digits-vit` finds it.

    A fake install prefix (POSIX and Windows site-packages, no checkout around the package) with the demo in
    share/vitstudio/models: the models folders list it, `local_folder("digits-vit")` and `bundled_demo()` find it, from
    a `--prefix` install and from the environment's own prefix (issue 49 item 2: `models --local` showed 0).
    [parametrised ×2]
    """
    from vitstudio.core.models.catalog import local_models, model_dirs
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import local_folder

    prefix = tmp_path / "prefix"
    site = prefix / layout
    (site / "vitstudio").mkdir(parents=True)  # the installed package; no pyproject.toml beside it
    demo = prefix / "share" / "vitstudio" / "models" / "digits-vit"
    demo.mkdir(parents=True)
    (demo / "config.json").write_text("{}")
    (demo / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(paths, "CHECKOUT_ROOT", site)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "another-env"))  # not the environment's own prefix
    assert paths.bundled_models_dir() == demo.parent and model_dirs()[1:] == [demo.parent]
    assert [e.name for f in model_dirs() for e in local_models(f)] == [str(demo)]  # `models --local`
    assert local_folder("digits-vit") == demo  # `--model digits-vit`
    monkeypatch.setattr(paths, "CHECKOUT_ROOT", tmp_path / "elsewhere" / "a" / "b" / "c")
    monkeypatch.setattr(sys, "prefix", str(prefix))  # installed into the environment itself
    assert model_dirs()[1:] == [demo.parent] and local_folder("digits-vit") == demo
    monkeypatch.setattr("vitstudio.core.models.demo.PROJECT_ROOT", site)
    assert bundled_demo() == demo  # what the GUI opens first

def test_settings_are_written_atomically_and_survive_a_bad_file(tmp_path):
    """SettingsStore writes JSON atomically (no temp left), is read by a new session; a corrupt file is moved to .bad;
    default path in the data folder.
    """
    from vitstudio.core.records import SettingsStore

    store = SettingsStore(tmp_path / "settings.json")
    store.set("training", {"epochs": 30, "preset": "last-blocks"})
    store.set("folder", "/data/ants")
    assert json.loads((tmp_path / "settings.json").read_text()) == {
        "folder": "/data/ants", "training": {"epochs": 30, "preset": "last-blocks"}}
    assert SettingsStore(tmp_path / "settings.json").get("training")["epochs"] == 30  # a second session reads it
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # no temporary file left
    (tmp_path / "settings.json").write_text("{not json")
    fresh = SettingsStore(tmp_path / "settings.json")
    assert fresh.get("folder") is None and (tmp_path / "settings.json.bad").read_text() == "{not json"
    assert SettingsStore().path == Path(os.environ[paths.DATA_ENV]) / "settings.json"


def _files(root: Path) -> dict:
    return {k: v for k, v in tree_state(root).items() if (root / k).is_file()}


def test_exclusions_are_kept_outside_the_dataset_keyed_by_its_real_path(tmp_path):
    """Exclusions written through a symlink are read by the real path, drop vanished files, live under data/datasets,
    keyed apart for same-named folders; dataset untouched.
    """
    from vitstudio.core.folder.exclusions import read_exclusions, write_exclusions

    data = tmp_path / "data"
    for name in ("a", "b"):
        (data / name).mkdir(parents=True)
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(data / name / "0.png")
    before = _files(data)
    link = tmp_path / "same-data"
    link.symlink_to(data)
    write_exclusions(link, [str(data / "a" / "0.png"), str(data / "b" / "0.png")])
    assert read_exclusions(data) == [str(data / "a" / "0.png"), str(data / "b" / "0.png")]
    (data / "b" / "0.png").unlink()  # moved or deleted since: no longer listed
    assert read_exclusions(data) == [str(data / "a" / "0.png")]
    assert _files(data) == {k: v for k, v in before.items() if k != "b/0.png"}  # nothing written in the dataset
    assert paths.dataset_dir(data).parent == Path(os.environ[paths.DATA_ENV]) / "datasets"
    assert paths.dataset_key(tmp_path / "other" / "data") != paths.dataset_key(data)  # same name, kept apart


def test_undo_sort_of_a_folder_finds_its_journal_in_the_data_folder_or_an_old_one_inside(tmp_path, capsys):
    """`undo-sort OUT`: the newest journal of sorts into OUT from the app's data folder; for a sort made before
    journals moved there, the log it left inside OUT (read, never rewritten elsewhere)."""
    import shutil

    from vitstudio.cli import main
    from vitstudio.core.folder.sorting import apply_sort, plan_sort

    src = tmp_path / "src"
    src.mkdir()
    for k in range(3):
        Image.fromarray(np.full((4, 4, 3), 40 * k, np.uint8)).save(src / f"{k}.png")
    out = tmp_path / "out"
    done = apply_sort(plan_sort([(str(p), "x", 1.0) for p in sorted(src.iterdir())], out))
    assert Path(done.log).parent == paths.journals_dir(out) and len(list(out.rglob("*.png"))) == 3
    assert main(["undo-sort", str(out)]) == 0 and list(out.iterdir()) == []

    old = tmp_path / "old"  # a sort of an earlier version: its v1 log inside the output folder
    (old / "x").mkdir(parents=True)
    lines = []
    for p in sorted(src.iterdir()):
        shutil.copy2(p, old / "x" / p.name)
        lines.append(json.dumps({"action": "copy", "source": str(p), "target": str(old / "x" / p.name), "label": "x"}))
    (old / "vitstudio-sort-20240101-000000.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["undo-sort", str(old)]) == 0 and not list(old.rglob("*.png"))
    assert "Undid 3 files" in capsys.readouterr().err
