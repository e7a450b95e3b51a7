"""Class folders named in bytes that are not UTF-8 (issue 53, item 9; Python holds such a name as surrogate escapes,
'\\udcff\\udcfe' for b'\\xff\\xfe'): a dataset holding one splits, trains and is audited like any other; every command
that prints or writes class names does so on a strict UTF-8 stdout (a desktop locale's; capsys' stream is one):
terminal text as \\xff\\xfe (as file names are shown), JSON ASCII with the name's \\udcNN escapes (the folder's bytes
come back with os.fsencode), CSV as the name's own bytes (as file names are written)."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset

pytestmark = pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="a folder name in any bytes is POSIX's")

BYTES = b"\xff\xfe"
NAME = os.fsdecode(BYTES)  # '\udcff\udcfe'


def non_utf8_dataset(root: Path, per_class: int = 4) -> Path:
    """red/, green/ and a class folder named b'\\xff\\xfe' (holding other colours), `per_class` images each."""
    make_dataset(root, per_class=per_class, classes={"red": (220, 40, 40), "green": (40, 200, 60),
                                                     NAME: (40, 60, 220)})
    return root


def test_a_class_folder_not_named_in_utf8_is_split_by_its_bytes(tmp_path):
    """The seeded split shuffles each class with a generator seeded by "seed:class" (random.Random's str seeding is
    its UTF-8 bytes): the name's own bytes for a name that is not UTF-8 (UnicodeEncodeError before), and the same
    split as ever for the others."""
    from vitstudio.core.data.datasets import scan_dataset, split_dataset

    scan = scan_dataset(non_utf8_dataset(tmp_path / "data", per_class=10))
    assert scan.classes == ("green", "red", NAME)
    split = split_dataset(scan, val_ratio=0.2, seed=0)
    for index, name, seed in ((2, NAME, b"0:" + BYTES), (1, "red", "0:red")):
        files = sorted((tmp_path / "data" / name).iterdir())
        random.Random(seed).shuffle(files)
        assert sorted(p for p, label in split.val if label == index) == sorted(files[:2])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`vitstudio finetune` (one step) on the dataset: (exit code, stderr, dataset, run folder)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from vitstudio.cli import main

    root = tmp_path_factory.mktemp("non-utf8")
    data, out, err = non_utf8_dataset(root / "data"), root / "run", io.StringIO()
    with pytest.MonkeyPatch.context() as env, redirect_stdout(io.StringIO()), redirect_stderr(err):
        for name in ("VITSTUDIO_CACHE_DIR", "VITSTUDIO_DATA_DIR", "VITSTUDIO_MODELS_DIR"):  # before the autouse one
            env.setenv(name, str(root / name))
        code = main(["finetune", str(data), "--model", TINY_SPEC, "--out", str(out), "--epochs", "1", "--batch-size",
                     "16", "--device", "cpu", "--precision", "fp32", "--quiet"])
    return code, err.getvalue(), data, out


def test_finetune_trains_on_a_class_folder_not_named_in_utf8(run):
    """The run trains on all three classes (it refused the dataset in one line naming no folder) and the model it
    leaves knows the class by its folder's bytes.

    [fine-tune]
    """
    from vitstudio.core.models.loading import load_model

    code, err, _, out = run
    assert code == 0, err
    assert [os.fsencode(c) for c in load_model(str(out), device="cpu").labels] == [b"green", b"red", BYTES]


def test_every_command_prints_and_writes_such_a_class_name(run, tmp_path, capsys):
    """predict (text, --json, --csv), eval, audit (text and --json, with the run's review), layers --json, sort
    --dry-run and suggest on a strict UTF-8 stdout: exit 0, the name shown as \\xff\\xfe in text, strict ASCII JSON
    giving the name back, the CSV holding its bytes."""
    from vitstudio.cli import main

    code, err, data, out = run
    assert code == 0, err
    image, model = str(data / NAME / "000.png"), ["--model", str(out)]
    texts = {}
    for name, args in {"predict": ["predict", image, *model, "--quiet"], "eval": ["eval", str(data), *model],
                       "audit": ["audit", str(data), *model, "--quiet"],
                       "sort": ["sort", str(data), *model, "--out", str(tmp_path / "s"), "--dry-run", "--quiet"],
                       "suggest": ["suggest", str(data), *model, "--quiet"]}.items():
        assert main(args) == 0, (name, capsys.readouterr().err[-2000:])
        texts[name] = capsys.readouterr().out
    for name in ("predict", "eval", "audit"):
        assert "\\xff\\xfe" in texts[name], (name, texts[name])
    strict = {"parse_constant": lambda c: pytest.fail(f"{c} in the JSON")}
    for args, classes in ((["predict", image, *model, "--json", "--quiet"], lambda d: [t["label"] for t in d["top"]]),
                          (["audit", str(data), "--json", "--quiet"], lambda d: d["classes"]),
                          (["layers", str(data), *model, "--json"], lambda d: d["classes"])):
        assert main(args) == 0, (args, capsys.readouterr().err[-2000:])
        text = capsys.readouterr().out
        assert text.isascii() and NAME in classes(json.loads(text, **strict)), (args, text[:500])
    assert main(["predict", image, *model, "--csv", str(tmp_path / "p.csv"), "--quiet"]) == 0
    assert b"," + BYTES + b"," in (tmp_path / "p.csv").read_bytes()


def test_every_report_escapes_such_a_class_name_where_it_prints_it_as_a_label(run, tmp_path, monkeypatch):
    """On a stdout that writes a name's own bytes (the C locale's surrogateescape), the reports are still valid
    UTF-8: audit's given / looks-like labels and per-class accuracy, eval's table, confusion matrix and mistakes,
    predict's lines and sort's plan print the class as \\xff\\xfe, as they print paths (audit wrote the bytes
    b'\\xff\\xfe' as labels beside the escaped paths)."""
    import io

    from vitstudio.cli import main

    code, err, data, out = run
    assert code == 0, err
    image, model = str(data / NAME / "000.png"), ["--model", str(out)]
    for args in (["audit", str(data), *model, "--quiet", "--top", "100"], ["eval", str(data), *model],
                 ["predict", image, *model, "--quiet"],
                 ["sort", str(data), *model, "--out", str(tmp_path / "s"), "--dry-run", "--quiet"]):
        raw = io.BytesIO()
        stream = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", write_through=True)
        monkeypatch.setattr(sys, "stdout", stream)
        monkeypatch.setattr(sys, "stderr", stream)
        assert main(args) in (0, 1), args[0]
        stream.flush()
        text = raw.getvalue().decode("utf-8")  # raises on the name's own bytes
        assert "\\xff\\xfe" in text, (args[0], text[-1500:])
    monkeypatch.undo()
