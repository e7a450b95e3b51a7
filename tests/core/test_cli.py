"""`vitstudio` CLI: outputs and exit codes."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_SPEC
from vitstudio.cli import main
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import classify
from vitstudio.core.models.loading import load_model


@pytest.fixture
def folder(tmp_path, photos):
    d = tmp_path / "imgs"
    d.mkdir()
    for name in ("astronaut", "chelsea"):
        (d / photos[name].name).write_bytes(photos[name].read_bytes())
    return d


def test_predict_json_matches_core(folder, tiny_weights, capsys):
    """`predict --json --topk 3` lists files in order with indices, labels and prob equal to core `classify`."""
    weights, _ = tiny_weights
    rc = main(["predict", str(folder), "--model", TINY_SPEC, "--weights", str(weights), "--json", "--topk", "3"])
    assert rc == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["path"] for d in lines] == [str(folder / "astronaut.jpg"), str(folder / "chelsea.png")]
    loaded = load_model(TINY_SPEC, weights=weights)
    expected = classify(loaded, [read_image(folder / "astronaut.jpg")], topk=3)[0]
    top = lines[0]["top"]
    assert [t["index"] for t in top] == list(expected.indices)
    assert [t["label"] for t in top] == list(expected.labels)
    assert top[0]["prob"] == pytest.approx(expected.probs[0], abs=1e-6)


def test_predict_some_failed_exit_1_and_csv(folder, tiny_weights, tmp_path, capsys):
    """One unreadable image: exit 1, CSV has an error row with no labels, others labelled, stderr "1 of 3 inputs
    failed".
    """
    (folder / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    out = tmp_path / "out.csv"
    rc = main(["predict", str(folder), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--csv", str(out)])
    assert rc == 1
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 3
    broken = next(r for r in rows if r["path"].endswith("broken.jpg"))
    assert broken["error"] and not broken["label_1"]
    assert all(r["label_1"] for r in rows if r is not broken)
    assert "1 of 3 inputs failed" in capsys.readouterr().err


def test_predict_json_error_record(tmp_path, tiny_weights, capsys):
    """A file that cannot be read gives exit 1 and the record `{"path", "error"}` (a file that is not there at all
    is refused before the model loads: test_seam_bad_inputs)."""
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    rc = main(["predict", str(broken), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--json"])
    assert rc == 1
    record = json.loads(capsys.readouterr().out)
    assert set(record) == {"path", "error"} and record["path"] == str(broken) and record["error"]


def test_usage_and_model_errors_exit_2(folder, capsys):
    """Unknown model, uncached hub model and unknown command all exit 2 with the expected messages."""
    assert main(["predict", str(folder), "--model", "no_such_model"]) == 2
    assert "Unknown model" in capsys.readouterr().err
    assert main(["predict", str(folder), "--model", "vit_tiny_patch16_224.augreg_in21k"]) == 2
    assert "not in the local cache" in capsys.readouterr().err
    assert main(["bogus"]) == 2



def test_a_command_without_model_runs_the_bundled_demo(capsys, monkeypatch):
    """No --model: the bundled demo, said in a note (issue 49 item 2: the first command a user types); without the
    demo installed, one line asking for --model.

    `predict SAMPLE` with no `--model` runs the bundled demo (a note on stderr names it; the sample's digit is top-1);
    with no demo installed, exit 2 and one line asking for `--model` (issue 49 item 2).
    """
    from vitstudio.core.models.demo import sample_images

    sample = sample_images()[0]  # digit-0-0010.png: a 0
    assert main(["predict", str(sample), "--json", "--topk", "1"]) == 0
    out = capsys.readouterr()
    assert "note: no --model given: the bundled demo, digits-vit (handwritten digits)" in out.err
    assert json.loads(out.out)["top"][0]["label"] == sample.name.split("-")[1]
    monkeypatch.setattr("vitstudio.core.models.demo.bundled_demo", lambda: None)
    assert main(["predict", str(sample)]) == 2
    assert capsys.readouterr().err.strip() == "error: give --model (the bundled demo, digits-vit, is not installed)"


@pytest.mark.parametrize("args, named", [
    (["explain", "IMAGE", "--method", "concept", "--concepts", "c.safetensors", "--json"], "--concept N"),
    (["concepts", "IMAGE", "--out", "/dev/null"], "--out /dev/null is a character device"),
    (["concepts", "IMAGE", "--out", ""], "'' names no file"),  # it wrote ..safetensors into the working folder
    (["concepts", "IMAGE", "--out", "OUT", "--seed", "99999999999999999999999"],
     "seed must be in [0, 4294967295], not 99999999999999999999999."),
    (["layers", "IMAGE", "--batch-size", "0"], "argument --batch-size: must be at least 1, not 0"),
    (["compare-layers", "IMAGE", "--model", "a", "--model", "b", "--batch-size", "-2"],
     "argument --batch-size: must be at least 1, not -2"),
], ids=["explain-concept-unnamed", "concepts-out-device", "concepts-out-empty", "concepts-seed-overflow",
        "layers-batch-0", "compare-layers-batch-negative"])
def test_options_once_taken_silently_are_refused_in_one_line(args, named, tmp_path, capsys):
    """Issue 49 item 18: each option out of its range is one line naming it and its range, exit 2, before any model
    loads and with nothing written (concepts --out /dev/null wrote /dev/null.json).

    `explain --method concept` without `--concept`, `concepts --out /dev/null`, `concepts --out ''` (it wrote
    `..safetensors` into the working folder: issue 53 item 11), `concepts --seed` beyond 64 bits, `layers --batch-size
    0`, `compare-layers --batch-size -2`: exit 2, one `error:` line naming the option and its range, before any model
    loads, nothing written (issue 49 item 18). [parametrised ×6]
    """
    from vitstudio.core.models.demo import sample_images

    image = str(sample_images()[0])
    args = [image if a == "IMAGE" else str(tmp_path / "out") if a == "OUT" else a for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and named in err and len(err.splitlines()) == 1, err
    assert not list(tmp_path.iterdir()) and not Path("/dev/null.json").exists()


def test_ablate_names_concepts_or_is_refused():
    """--ablate ",," named no concept and switched nothing off without a word (issue 49 item 18).

    `parse_scales` keeps `3,,4` and `5=2.5` and refuses `,,`, an empty and a blank `--ablate` naming the option (issue
    49 item 18).
    """
    from vitstudio.core.concepts.intervene import parse_scales

    assert parse_scales("3,,4") == {3: 0.0, 4: 0.0} and parse_scales(None, ["5=2.5"]) == {5: 2.5}
    for nothing in (",,", "", " , "):
        with pytest.raises(ValueError, match="--ablate takes concept numbers"):
            parse_scales(nothing)

def test_models_and_card(capsys):
    """`models --filter` rows; `card --json` grid/tokens/heads/params, and GFLOPs equal a per-block FLOP formula written
    in the test.
    """
    assert main(["models", "--filter", "deit_tiny*", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["name"] for r in rows} == {"deit_tiny_patch16_224.fb_in1k", "deit_tiny_distilled_patch16_224.fb_in1k"}
    assert main(["card", "--model", TINY_SPEC, "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["grid_size"] == [4, 4] and card["tokens"] == 17 and card["heads"] == 2 and card["params"] > 0
    # FLOPs of the tiny ViT from the formula: per block 2*(N*D*3D + N*N*D*2 + N*D*D + 2*N*D*4D), + patch conv, + head
    n, d = 17, 32
    per_block = 2 * (n * d * 3 * d + 2 * n * n * d + n * d * d + 2 * n * d * 4 * d)
    expected = 2 * per_block + 2 * 16 * (3 * 8 * 8) * d + 2 * d * 5
    assert card["gflops"] * 1e9 == pytest.approx(expected, rel=1e-6)



@pytest.mark.skipif(sys.platform != "linux", reason="the XDG base directory spec is Linux's")
def test_card_shows_the_three_folders_and_what_moves_each(tmp_path, monkeypatch, capsys):
    """VITSTUDIO_DATA_DIR moves the data and models folders, not the caches (issue 49 item 15): the card says
    where each is; the cache folder is the XDG spec's $XDG_CACHE_HOME/vitstudio, written out here.

    With only VITSTUDIO_DATA_DIR set, `card` shows the models folder inside it, the data folder, and the cache folder at
    $XDG_CACHE_HOME/vitstudio (reference: the XDG spec) with what moves each; `--json` has the same three under
    `folders` (issue 49 item 15). [Linux only]
    """
    from vitstudio.core import files

    monkeypatch.setenv(files.DATA_ENV, str(tmp_path / "portable"))
    monkeypatch.delenv(files.MODELS_ENV)
    monkeypatch.delenv(files.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    assert main(["card", "--model", TINY_SPEC]) == 0
    shown = {line.split("  ")[0]: line.split("  ", 1)[1].strip() for line in capsys.readouterr().out.splitlines()}
    assert shown["Models folder"] == f"{tmp_path / 'portable' / 'models'}  (VITSTUDIO_MODELS_DIR; else models/ in " \
                                     f"the data folder)"
    assert shown["Data folder"] == f"{tmp_path / 'portable'}  (VITSTUDIO_DATA_DIR)"
    assert shown["Cache folder"].startswith(f"{tmp_path / 'xdg-cache' / 'vitstudio'}  (VITSTUDIO_CACHE_DIR;")
    assert "not moved by VITSTUDIO_DATA_DIR" in shown["Cache folder"]
    assert main(["card", "--model", TINY_SPEC, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["folders"] == {
        "models": str(tmp_path / "portable" / "models"), "data": str(tmp_path / "portable"),
        "cache": str(tmp_path / "xdg-cache" / "vitstudio")}

def test_models_family_choices_are_the_catalogs(capsys):
    """The CLI lists its --family choices without importing timm; they must stay the catalog's families.

    The parser's `--family` choices equal the catalog's FAMILIES + OpenCLIP; `--family swin` lists only Swin.
    """
    from vitstudio.cli import build_parser
    from vitstudio.core.models.catalog import FAMILIES, OPENCLIP_FAMILY

    models = next(a for a in build_parser()._subparsers._group_actions[0].choices["models"]._actions
                  if a.dest == "family")
    assert sorted(models.choices) == sorted({key for key, _ in FAMILIES.values()} | {OPENCLIP_FAMILY})
    assert main(["models", "--family", "swin", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(r["family"] == "swin" for r in rows)


def test_entry_point_runs_as_module(monkeypatch, capsys):
    """`python -m vitstudio` runs vitstudio/__main__.py as `-m` does (runpy, `__main__`, sys.argv), in this process:
    a fresh interpreter would add only the ~4 s of importing torch again; test_sorting_faults.py starts
    `python -m vitstudio` as processes of their own.

    `python -m vitstudio models --filter …` (vitstudio/__main__.py run by runpy as `-m` runs it, in the test's process)
    exits 0 and lists the model; `python -m vitstudio` as a process of its own: test_sorting_faults.py's `sort --resume`
    and `undo-sort` processes.
    """
    import runpy

    monkeypatch.setattr(sys, "argv", ["vitstudio", "models", "--filter", "vit_tiny_patch16_224.aug*"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("vitstudio", run_name="__main__", alter_sys=True)
    assert exited.value.code == 0
    assert "vit_tiny_patch16_224.augreg_in21k_ft_in1k" in capsys.readouterr().out


def test_a_command_lets_the_models_idle_threads_sleep_unless_the_user_says(monkeypatch):
    """OMP_WAIT_POLICY=PASSIVE is set before torch loads (OpenMP reads it once); a user's own value is kept; in a
    process that already holds torch nothing changes (no one would read it).

    A command sets OMP_WAIT_POLICY=PASSIVE before torch loads (folder passes: the model's threads stop spinning against
    the reader threads), keeps a user's own value, and changes nothing once torch is loaded.
    """
    import os

    from vitstudio.cli import app

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with monkeypatch.context() as fresh:
        fresh.delitem(sys.modules, "torch")  # as in a new `vitstudio` process: nothing has imported torch yet
        app._quiet_idle_threads()
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
        fresh.setenv("OMP_WAIT_POLICY", "ACTIVE")
        app._quiet_idle_threads()
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    app._quiet_idle_threads()  # torch is loaded in this process
    assert "OMP_WAIT_POLICY" not in os.environ


@pytest.mark.parametrize("spec", ["custom:img=32,patch=8,width=32,depth=2,heads=2,classes=0", "custom:img=1000000",
                                  "custom:depth=100000"])
def test_bad_model_inputs_exit_2_with_one_line(spec, capsys, tmp_path):
    """Invalid `custom:` specs give exit 2 with one "error:" line, no traceback, for `card` and `finetune` (which says
    "valid range" and creates no run folder). [parametrised ×3]
    """
    from vitstudio.cli import main

    assert main(["card", "--model", spec]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err
    from tests.core.synthetic_data import make_dataset

    data = make_dataset(tmp_path / "data", per_class=3)
    assert main(["finetune", str(data), "--model", spec, "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "valid range" in err[-1] and "Traceback" not in "\n".join(err)
    assert not (tmp_path / "run").exists()
