"""The seam matrix's bad-input rows (issue 53): every command × every hostile input of the kind it takes, through the
CLI entry in-process, on capsys' strict UTF-8 streams. A cell refuses in exactly one `error:` line (exit 2; exit 1 for
a full disk, whose line names the file), or, for inputs a command must take (a class folder named in bytes that are
not UTF-8, a damaged checkpoint it starts afresh from), works; never a traceback.

The hostile inputs are the hostile tests' own generators, imported: adapter folders (test_hostile_adapters.SPOILS),
concepts files (test_concepts_files.SPOILS), full disks (the fault points of test_full_disk), non-UTF-8 class folders
(test_non_utf8_classes). The commands are read from the parser: a new command that takes --model gets every adapter
row on day one, and fails here until MODEL_COMMANDS says what else it needs."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from tests.core import test_concepts_files as concepts_files
from tests.core import test_hostile_adapters as hostile_adapters
from tests.core.synthetic_data import make_dataset
from tests.core.test_hostile_adapters import adapter  # noqa: F401 (the fixture: a good adapter folder, spoilt per cell)
from tests.core.test_non_utf8_classes import non_utf8_dataset
from vitstudio.cli import main
from vitstudio.cli.app import build_parser
from vitstudio.core.folder import view_select, views

# command -> its arguments besides the model (IMAGE, DATA and OUT are filled in per cell)
MODEL_COMMANDS = {
    "predict": ["IMAGE", "--quiet"], "explain": ["IMAGE", "--method", "rollout", "--json"],
    "faithfulness": ["IMAGE"], "play": ["IMAGE"], "finetune": ["DATA", "--out", "OUT", "--epochs", "1", "--quiet"],
    "eval": ["DATA"], "embed": ["IMAGE", "--quiet"], "sort": ["DATA", "--out", "OUT", "--dry-run", "--quiet"],
    "audit": ["DATA", "--quiet"], "layers": ["DATA"], "compare-layers": ["IMAGE", "--model", TINY_SPEC],
    "concepts": ["DATA", "--out", "OUT", "--quiet"], "suggest": ["DATA", "--quiet"], "card": [],
    "export": ["--format", "onnx", "--out", "OUT"],  # export names its model as an argument, not with --model
    "teach": ["DATA", "--export", "OUT", "--quiet"], "scores": ["DATA", "--quiet"],
    "segment": ["DATA", "--masks", "DATA", "--out", "OUT", "--quiet"], "match": ["IMAGE", "IMAGE"],
    "views": ["DATA", "--export", "any", "--coco", "OUT", "--masks", "DATA"],  # the model is loaded before the view
    "registers": ["DATA", "--out", "OUT.json"], "artifacts": ["DATA"],
}
# eval needs a model of the dataset's classes: test_non_utf8_classes runs it on a run fine-tuned there
DATA_COMMANDS = ("audit", "layers", "sort", "suggest", "embed", "concepts", "finetune", "teach", "scores")


def _takes_model() -> set[str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    return {name for name, sub in commands.items()
            if any("--model" in a.option_strings or a.dest == "model" for a in sub._actions)}


def test_every_command_that_takes_a_model_has_its_bad_input_cells():
    """The commands the parser gives --model (or a model argument) are exactly MODEL_COMMANDS: a new command fails here
    until its cells exist.
    """
    assert _takes_model() == set(MODEL_COMMANDS)


def _argv(command: str, model: str, image, data, out) -> list[str]:
    fill = {"IMAGE": str(image), "DATA": str(data), "OUT": str(out)}
    return [command, *([model] if command == "export" else ["--model", model]),
            *(fill.get(a, a) for a in MODEL_COMMANDS[command])]


def _one_line(capsys, code, expected: int, says: str | tuple[str, ...], progress: bool = False, row: str = "") -> None:
    """Exactly one line on stderr, or, for a command without --quiet (`progress`), its progress lines and then the
    one `error:` line last."""
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert "Traceback" not in out.out + out.err, (row, out.err[-3000:])
    errors = [line for line in lines if line.startswith("error: ")]
    assert code == expected and errors == lines[-1:] and (progress or len(lines) == 1), (row, code, lines)
    assert all(piece in errors[0] for piece in ((says,) if isinstance(says, str) else says)), (row, errors)


@pytest.mark.parametrize("command", sorted(MODEL_COMMANDS))
def test_a_hostile_adapter_is_one_line_in_every_command(command, adapter, tmp_path, capsys):  # noqa: F811
    """A column per command, every adapter row in it (each refused before anything is read: ~10 ms a cell).

    Each of the 21 adapter spoils of test_hostile_adapters in predict, explain, faithfulness, play, finetune, eval,
    embed, sort, audit, layers, compare-layers, concepts, suggest, card, export, teach, segment, match, views (its
    --export --coco loads the model before reading the view), registers, artifacts: exit 2, one line with the spoil's
    reason, nothing written, no pickle run. [parametrised ×21]
    """
    good, image = adapter
    make_dataset(tmp_path / "data", per_class=2)
    for spoil, (spoiler, says) in hostile_adapters.SPOILS.items():
        folder = shutil.copytree(good, tmp_path / spoil / "adapter")
        spoiler(folder)
        code = main(_argv(command, str(folder), image, tmp_path / "data", tmp_path / "out"))
        _one_line(capsys, code, 2, says, row=spoil)
        assert not (tmp_path / "out").exists() and not (tmp_path / spoil / "ran").exists(), spoil


@pytest.fixture
def concepts_pair(tiny_weights, tmp_path):
    """(the model's arguments, a good concepts pair made for it, an image)."""
    from vitstudio.core.concepts.concepts_file import save_concepts
    from vitstudio.core.folder.embedcache import model_fingerprint
    from vitstudio.core.models.loading import load_model

    model = ["--model", TINY_SPEC, "--weights", str(tiny_weights[0])]
    good = concepts_files.made(layer=1)
    good.meta["fingerprint"] = model_fingerprint(load_model(TINY_SPEC, str(tiny_weights[0]), "cpu"))
    save_concepts(good, tmp_path / "good")
    image = tmp_path / "a.png"
    Image.new("RGB", (32, 32), (200, 30, 90)).save(image)
    return model, tmp_path / "good", image


@pytest.mark.parametrize("command", ["predict", "explain"])
def test_a_hostile_concepts_file_is_one_line_in_every_command(command, concepts_pair, tmp_path, capsys):
    """Each of the 16 concepts-file spoils of test_concepts_files in `predict --concepts` and `explain --method
    concept`: exit 2, one line with its reason, no map written. [parametrised ×2]
    """
    model, good, image = concepts_pair
    out = str(tmp_path / "m.npy")
    args = {"predict": ["predict", str(image), "--quiet"],
            "explain": ["explain", str(image), "--method", "concept", "--concept", "0", "--out", out]}[command]
    for spoil, (spoiler, says) in concepts_files.SPOILS.items():
        concepts_files._pair(tmp_path / spoil, *concepts_files._spoiled(good, spoiler))
        _one_line(capsys, main([*args, *model, "--concepts", str(tmp_path / spoil)]), 2, says, row=spoil)
    assert not (tmp_path / "m.npy").exists()


def _images(folder, n: int = 3):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.new("RGB", (32, 32), (80 * i, 40, 200)).save(folder / f"{i}.png")
    return folder


FULL = [("concepts", "cache-append", "tokens-0.f16"), ("concepts", "before-rename-c.safetensors.partial", "c.safe"),
        ("concepts", "before-rename-c.safetensors", "c.safetensors"), ("concepts", "before-rename-c.json", "c.json"),
        ("embed", "cache-append", ".f32"), ("layers", "cache-append", "/layers/"),
        ("views", "before-rename-t.csv", "t.csv")]


@pytest.mark.parametrize(("command", "point", "file"), FULL, ids=[f"{c}|{p}" for c, p, _ in FULL])
def test_a_full_disk_is_one_line_naming_the_file_in_every_command(command, point, file, tiny_weights, tmp_path,
                                                                   monkeypatch, capsys):
    """VITSTUDIO_FULL_AT at concepts' token cache, checkpoint, weights and sidecar, embed's and layers' caches, `views
    --export --csv`'s file at its rename: exit 1, one line naming the file and saying the same command goes on.
    [parametrised ×7]
    """
    from vitstudio.core import files

    data = tmp_path / "data"
    for name in ("a", "b"):
        _images(data / name)
    args = {"concepts": [str(data), "--size", "4", "--k", "2", "--epochs", "1", "--out", str(tmp_path / "c"),
                         "--quiet"], "embed": [str(data), "--quiet"], "layers": [str(data), "--folds", "2"],
            "views": [str(data), "--export", "all", "--csv", str(tmp_path / "t.csv")]}[command]
    views.save_view(data, "all", [{"field": "path", "op": "glob", "value": "*"}])
    monkeypatch.setattr(files, "_passes", {})  # the fault point counts passes per process
    monkeypatch.setenv("VITSTUDIO_FULL_AT", point)
    code = main([command, *args, "--model", TINY_SPEC, "--weights", str(tiny_weights[0])])
    _one_line(capsys, code, 1, ("error: could not write ", file, "run the same command again"),
              progress=command == "layers")
    monkeypatch.delenv("VITSTUDIO_FULL_AT")


@pytest.mark.parametrize("command", DATA_COMMANDS)
def test_a_class_folder_not_named_in_utf8_works_in_every_command(command, tmp_path, capsys):
    """Exit 0 on capsys' strict UTF-8 stdout; stdout says the name as \\xff\\xfe or, in JSON, as its escapes.

    The dataset of test_non_utf8_classes through audit, layers, sort, suggest, embed, concepts, finetune, teach: exit 0;
    layers/audit --json give the name back. [parametrised ×8] [fine-tune]
    """
    data = non_utf8_dataset(tmp_path / "data", per_class=2)
    args = {"sort": ["--out", str(tmp_path / "s"), "--dry-run"], "concepts": ["--size", "4", "--k", "2", "--out",
            str(tmp_path / "c")], "finetune": ["--out", str(tmp_path / "run"), "--epochs", "1", "--batch-size", "16",
                                               "--device", "cpu", "--precision", "fp32"],
            "layers": ["--folds", "2", "--json"], "audit": ["--json"]}.get(command, [])
    code = main([command, str(data), "--model", TINY_SPEC, *args, *([] if command == "layers" else ["--quiet"])])
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err, out.err[-3000:]
    if command in ("layers", "audit"):
        assert "\udcff\udcfe" in json.loads(out.out)["classes"]


@pytest.mark.parametrize(("case", "code", "says"), [
    ("out-empty", 2, "'' names no file"), ("partial-a-list", 0, ""), ("partial-a-folder-name", 2, "is a folder")])
def test_a_hostile_concepts_output_is_one_line_or_started_afresh(case, code, says, tiny_weights, tmp_path,
                                                                 monkeypatch, capsys):
    """--out '' (it wrote ..safetensors here), a checkpoint FILE.safetensors.partial that is a list (started afresh:
    a traceback before), a folder named FILE.safetensors.

    `concepts --out ''` and a folder named FILE.safetensors: exit 2, one line, no `..safetensors`; a checkpoint
    FILE.safetensors.partial that is a list: started afresh, exit 0. [parametrised ×3]
    """
    import torch

    monkeypatch.chdir(tmp_path)
    out = "" if case == "out-empty" else str(tmp_path / "c")
    if case == "partial-a-list":
        torch.save([1, 2, 3], tmp_path / "c.safetensors.partial")
    if case == "partial-a-folder-name":
        (tmp_path / "c.safetensors").mkdir()
    argv = ["concepts", str(_images(tmp_path / "images")), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
            "--size", "4", "--k", "2", "--epochs", "1", "--out", out, "--quiet"]
    if code == 0:
        assert main(argv) == 0 and "Traceback" not in capsys.readouterr().err
    else:
        _one_line(capsys, main(argv), code, says)
    assert not (tmp_path / "..safetensors").exists()


# command line -> what its one line says; each refused before the model loads (while parsing, or from the paths given)
EARLY = {
    "predict --topk 0": (["predict", "IMAGE", "--topk", "0"], "argument --topk: must be at least 1, not 0"),
    "predict --batch-size -1": (["predict", "IMAGE", "--batch-size", "-1"],
                                "argument --batch-size: must be at least 1, not -1"),
    "embed --batch-size 0": (["embed", "IMAGE", "--batch-size", "0"], "argument --batch-size: must be at least 1"),
    "scores --batch-size 0": (["scores", "DATA", "--batch-size", "0"], "argument --batch-size: must be at least 1"),
    "suggest --n 0": (["suggest", "DATA", "--n", "0"], "argument --n: must be at least 1, not 0"),
    "sort --min-confidence 2": (["sort", "DATA", "--out", "OUT", "--min-confidence", "2"],
                                "argument --min-confidence: must be in [0, 1], not 2"),
    "audit --hash-distance 65": (["audit", "DATA", "--hash-distance", "65"],
                                 "argument --hash-distance: must be in [0, 64], not 65"),
    "layers --folds 1": (["layers", "DATA", "--folds", "1"], "argument --folds: must be at least 2, not 1"),
    "faithfulness --blur-sigma 0": (["faithfulness", "IMAGE", "--blur-sigma", "0"],
                                    "argument --blur-sigma: must be above 0, not 0"),
    "explain --discard 1.5": (["explain", "IMAGE", "--method", "rollout", "--discard", "1.5", "--json"],
                              "argument --discard: must be in [0, 0.99], not 1.5"),
    "finetune --lr 0": (["finetune", "DATA", "--out", "OUT", "--lr", "0"],
                        "lr (learning rate) must be in (0, 10], not 0."),
    "predict --topk two": (["predict", "IMAGE", "--topk", "two"], "argument --topk: 'two' is not a whole number"),
    "explain rollout --layer --head --patch": (
        ["explain", "IMAGE", "--method", "rollout", "--layer", "99", "--head", "7", "--patch", "100,100", "--json"],
        "--layer, --head, --patch are not used by rollout (its options: --fusion, --discard)"),
    "explain pos-embed --layer": (["explain", "--method", "pos-embed", "--layer", "0", "--json"],
                                  "--layer is not used by pos-embed (its options: none)"),
    **{f"{command} missing": ([command, "MISSING", *rest], "no such file or folder: ")
       for command, rest in (("predict", []), ("embed", []), ("explain", ["--method", "rollout", "--json"]),
                             ("scores", []), ("sort", ["--out", "OUT"]), ("audit", []), ("suggest", []),
                             ("faithfulness", []), ("layers", []), ("concepts", ["--out", "OUT"]))},
    **{f"{command} empty folder": ([command, "EMPTY", *rest], "no image files found in the given paths")
       for command, rest in (("predict", []), ("explain", ["--method", "rollout", "--json"]), ("embed", []),
                             ("scores", []))},
}


@pytest.mark.parametrize("case", EARLY)
def test_a_small_refusal_comes_before_the_model_loads(case, tmp_path, monkeypatch, capsys):
    """A non-positive count, a value out of its range, an option the chosen method does not take, a path that is
    not there and a folder with no image are each one `error:` line, exit 2, said before any model is loaded (they
    came after the model had loaded, 5-7 s, or not at all: the explain options were ignored, exit 0)."""
    from vitstudio.cli import common

    def no_model(args):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(common, "_model_from_args", no_model)
    (tmp_path / "empty").mkdir()
    image = _images(tmp_path / "images", 1) / "0.png"
    fill = {"IMAGE": str(image), "DATA": str(make_dataset(tmp_path / "data", per_class=2)),
            "OUT": str(tmp_path / "out"), "MISSING": str(tmp_path / "gone.png"), "EMPTY": str(tmp_path / "empty")}
    argv, says = EARLY[case]
    _one_line(capsys, main([fill.get(a, a) for a in argv] + ["--model", TINY_SPEC]), 2, says, row=case)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("option", "says"), [
    (["--layer", "99"], "99"), (["--head", "7"], "7"), (["--patch", "100,100"], "100")])
def test_an_explain_option_outside_the_model_is_one_line(option, says, tiny_weights, tmp_path, capsys):
    """--layer beyond the model's depth, --head beyond its heads, --patch outside its grid (token map of the tiny ViT:
    2 blocks, 2 heads, 4×4 patches): one line naming the value, exit 2, nothing written."""
    image = _images(tmp_path / "images", 1) / "0.png"
    argv = ["explain", str(image), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--method", "token",
            *(["--patch", "0,0"] if option[0] != "--patch" else []), *option, "--out", str(tmp_path / "m.npy")]
    _one_line(capsys, main(argv), 2, says, row=option[0])
    assert not (tmp_path / "m.npy").exists()


def onto_inputs_tree(root) -> dict[str, str]:
    """The places the outputs-onto-inputs cells name: a class-folder DATA with a view "all", PAINTED masks, a Teach
    project P, and folders of a user's own files named as ours would be (USER_MASK, USER_AREAS, USER_ONNX)."""
    from vitstudio.core.teach.project import create_project

    data = make_dataset(root / "data", per_class=2)
    views.save_view(data, "all", [{"field": "path", "op": "glob", "value": "*"}])
    (root / "painted").mkdir()
    Image.new("L", (32, 32), 1).save(root / "painted" / "000.png")
    create_project(root / "p", ["ants", "bees"])
    make_dataset(root / "p" / "images", per_class=2, classes={"ants": (200, 40, 40), "bees": (40, 200, 40)})
    for name, file in (("user-mask", "000.png"), ("user-areas", "areas.csv"), ("user-onnx", "model.onnx")):
        (root / name).mkdir()
        (root / name / file).write_bytes(b"the user's own")
    return {"DATA": str(data), "PAINTED": str(root / "painted"), "P": str(root / "p"),
            "USER_MASK": str(root / "user-mask"), "USER_AREAS": str(root / "user-areas"),
            "USER_ONNX": str(root / "user-onnx")}


def filled(argv: list[str], fill: dict[str, str]) -> list[str]:
    """`argv` with each argument's first part (before a /) replaced by its place in `fill`."""
    return [fill[a.split("/")[0]] + a[len(a.split("/")[0]):] if a.split("/")[0] in fill else a for a in argv]


# command line -> what its one line says: an output onto what the command reads, or over files it did not write
ONTO_INPUTS = {
    "segment --out PAINTED": (["segment", "DATA", "--masks", "PAINTED", "--out", "PAINTED"],
                              "--out {PAINTED} is the painted masks' folder"),
    "segment --out PAINTED/sub": (["segment", "DATA", "--masks", "PAINTED", "--out", "PAINTED/sub"],
                                  "is inside the painted masks' folder"),
    "segment --out over a user's <stem>.png": (["segment", "DATA", "--masks", "PAINTED", "--out", "USER_MASK"],
                                               "holds files ViT Studio did not write (e.g. 000.png)"),
    "segment --out over a user's areas.csv": (["segment", "DATA", "--masks", "PAINTED", "--out", "USER_AREAS"],
                                              "holds files ViT Studio did not write (e.g. areas.csv)"),
    "views --labels-csv onto an image": (["views", "DATA", "--export", "all", "--labels-csv", "DATA/red/000.png"],
                                         "--labels-csv {DATA}/red/000.png is inside the folder the view is of"),
    "views --csv onto an image": (["views", "DATA", "--export", "all", "--csv", "DATA/green/001.png"],
                                  "is inside the folder the view is of"),
    "teach --export over a user's model.onnx": (["teach", "DATA", "--export", "USER_ONNX"],
                                                "holds files ViT Studio did not write (e.g. model.onnx)"),
    "teach P --export P/images": (["teach", "P", "--export", "P/images"], "is inside the project folder"),
    "teach P --export P/images/ants": (["teach", "P", "--export", "P/images/ants"], "is inside the project folder"),
    "teach P --export P": (["teach", "P", "--export", "P"], "is the project folder"),
    "teach P/images --export P": (["teach", "P/images", "--export", "P"], "holds the project folder"),
    "explain IMAGE --out IMAGE": (["explain", "DATA/red/000.png", "--method", "rollout", "--out", "DATA/red/000.png"],
                                  "is one of the images given to read"),
    "predict FOLDER --csv onto an image": (["predict", "DATA", "--csv", "DATA/red/001.png", "--quiet"],
                                           "is an image of {DATA}, which is given to read"),
}


@pytest.mark.parametrize("case", ONTO_INPUTS)
def test_an_output_onto_the_inputs_is_one_line_and_writes_nothing(case, tmp_path, monkeypatch, capsys):
    """`segment --out` onto the painted masks (or inside them), or over a user's <stem>.png or areas.csv; `views
    --export --labels-csv/--csv` onto an image of the folder; `teach --export` over a user's
    model.onnx, inside the project's images or a class folder, onto the project, or holding it; `explain IMG --out IMG`
    and `predict FOLDER --csv` onto one of its images: one `error:` line, exit 2, before any model loads, and not one
    byte under the test's folder changed (core/outputs.py's rule: an output replaces only an earlier output of its
    own, never an input). [parametrised ×13]"""
    from vitstudio.cli import common

    def no_model(args):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(common, "_model_from_args", no_model)
    fill = onto_inputs_tree(tmp_path)
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    argv, says = ONTO_INPUTS[case]
    argv = filled(argv, fill)
    model = [] if argv[0] == "views" else ["--model", TINY_SPEC]  # views --csv with a model predicts with it
    _one_line(capsys, main([*argv, *model]), 2, says.format(**fill), row=case)
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == before


# -- hostile records, masks, settings and names (a FIFO, a device, the wrong shape, escapes) --------------------------
def _fifo(path) -> None:
    import os

    os.mkfifo(path)


def _link(target: str):
    def spoil(path) -> None:
        import os

        os.symlink(target, path)
    return spoil


def _text(text: str | bytes):
    def spoil(path) -> None:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return spoil


def _sparse_over_limit(path) -> None:
    from vitstudio.core import records

    with open(path, "wb") as f:
        f.truncate(records.RECORD_LIMIT + 1)  # sparse: no 64 MB written


# a records file (tags.json, views.json) -> what the warning that sets it aside says
RECORD_SPOILS = {
    "a FIFO": (_fifo, "is not a regular file (a FIFO"), "a link to /dev/zero": (_link("/dev/zero"), "to /dev/zero"),
    "a link to /dev/urandom": (_link("/dev/urandom"), "to /dev/urandom"),
    "over the size limit": (_sparse_over_limit, "larger than any record"),
    "not JSON": (_text('{"views": '), "is not JSON"), "not UTF-8": (_text(b'{"tags": "\xff"}'), "is not JSON"),
    "a JSON list": (_text("[]"), "holds a JSON list, not an object"),
    "an object of lists": (_text('{"tags": [], "views": [], "content": [], "models": []}'), "as a JSON list"),
}
RECORD_COMMANDS = {"tags.json": ["tag", "DATA", "DATA/0.png", "--add", "keep"],
                   "views.json": ["views", "DATA", "--json"]}


def records_folder(root):
    """(a folder of 3 images, the folder of its records in the app's data folder)."""
    from vitstudio.core.files import dataset_dir

    data = _images(root / "data")
    (records := dataset_dir(data)).mkdir(parents=True, exist_ok=True)
    return data, records


@pytest.mark.timeout(60)  # a FIFO read would block for ever
def test_a_hostile_record_is_set_aside_in_one_warning_line(tmp_path, capsys):
    """tags.json and views.json as a FIFO, a link to /dev/zero or /dev/urandom, a file over the records' size limit
    (sparse), not JSON, not UTF-8, a list, an object whose "tags"/"views" are lists: `tag` and `views --json` end 0
    at once (no hang, no MemoryError, no traceback), with one `warning:` line naming the file, why, and the `.bad`
    it was set aside as (the FIFO and the links moved, never opened for reading), and start afresh (the tag is
    written). [×16 cells in one test]"""
    data, records = records_folder(tmp_path)
    for name, argv in RECORD_COMMANDS.items():
        for spoil, (spoiler, says) in RECORD_SPOILS.items():
            for old in records.glob(f"{name}*"):
                old.unlink()
            spoiler(records / name)
            code = main([a.replace("DATA", str(data)) for a in argv])
            out = capsys.readouterr()
            warnings = [line for line in out.err.splitlines() if line.startswith("warning: ")]
            assert code == 0 and "Traceback" not in out.err, (name, spoil, out.err[-2000:])
            assert len(warnings) == 1 and says in warnings[0] and f"set aside as {name}.bad" in warnings[0], \
                (name, spoil, out.err)
            assert os.path.lexists(records / f"{name}.bad"), (name, spoil)
    assert views.read_tags(data) == {"0.png": ["keep"]}


def test_a_second_damaged_record_keeps_the_first_one_set_aside(tmp_path, capsys):
    """A damaged views.json is set aside as views.json.bad, the next damaged one as views.json.bad.2 (it overwrote
    the first): each `.bad` holds its own bytes, and each time says so on stderr."""
    data, records = records_folder(tmp_path)
    for n, text in ((1, b"first {"), (2, b"second {")):
        (records / "views.json").write_bytes(text)
        assert main(["views", str(data), "--json"]) == 0
        assert f"set aside as views.json.bad{'' if n == 1 else '.2'}" in capsys.readouterr().err
    assert (records / "views.json.bad").read_bytes() == b"first {"
    assert (records / "views.json.bad.2").read_bytes() == b"second {"


# a saved view whose rules a record holds in the wrong shape -> what its refusal says
VIEW_SPOILS = {
    "a tag rule's value [['x']]": ({"field": "tags", "op": "any", "value": [["x"]]}, "is not a name"),
    "a glob value 5": ({"field": "path", "op": "glob", "value": 5}, "compares path with 5, which is not a text"),
    "a confidence rule 'abc'": ({"field": "confidence", "op": ">=", "value": "abc"}, "which is not a number"),
    "a label rule's value {}": ({"field": "label", "op": "in", "value": [{}]}, "is not a name"),
    "an op that is a list": ({"field": "path", "op": ["glob"], "value": "*"}, "takes glob, not ['glob']"),
}


def test_a_saved_view_of_the_wrong_shape_is_left_out_or_refused_in_one_line(tmp_path, capsys):
    """views.json holding a rule whose value is [['x']], a glob of 5, a confidence rule of 'abc', a label list of
    {}, an op that is a list: `views --json` lists the good view and leaves the bad one out with one `warning:` line
    (exit 0); `views --export BAD --labels-csv` is one `error:` line saying which rule and why (exit 2), nothing
    written. Each was a TypeError traceback. A view saved with a model named with a NUL is as one saved with none:
    `predict --view` says to give --model, in one line (it tried to load 'a\\x00b': two lines). [×6 records]"""
    import json

    data, records = records_folder(tmp_path)
    for spoil, (rule, says) in VIEW_SPOILS.items():
        good = [{"field": "path", "op": "glob", "value": "*"}]
        (records / "views.json").write_text(json.dumps({"views": {"bad": [rule], "good": good}}))
        code = main(["views", str(data), "--json"])
        out = capsys.readouterr()
        assert code == 0 and json.loads(out.out) == {"good": {"rules": good, "images": 3}}, (spoil, out)
        assert out.err.count("warning: ") == 1 and "'bad'" in out.err and says in out.err, (spoil, out.err)
        code = main(["views", str(data), "--export", "bad", "--labels-csv", str(tmp_path / "l.csv")])
        _one_line(capsys, code, 2, ("the view 'bad' saved for", "cannot be used", says), row=spoil)
        assert not (tmp_path / "l.csv").exists()
    saved = {"views": {"v": [{"field": "confidence", "op": ">=", "value": 0.5}]},
             "models": {"v": {"model": "a\0b", "weights": None}}}  # a model no path can name
    (records / "views.json").write_text(json.dumps(saved))
    _one_line(capsys, main(["predict", str(data), "--view", "v", "--quiet"]), 2, "give --model", row="NUL")


def test_a_long_view_name_is_refused_and_an_old_one_still_works(tmp_path, capsys):
    """`views --save` with a 10,000-character name: one line, exit 2. A view saved so by an earlier version is still
    a dataset: its labels file is named by a cut name and a digest (it was 'File name too long')."""
    import json

    data, records = records_folder(tmp_path)
    _one_line(capsys, main(["views", str(data), "--save", "x" * 10_000, "--path", "*"]), 2, "at most 200 characters")
    (records / "views.json").write_text(json.dumps({"views": {"y" * 10_000: [{"field": "path", "op": "glob",
                                                                               "value": "*"}]}}))
    target = view_select.view_labels_file(data, "y" * 10_000)
    assert len(target.name) < 100 and len(target.read_text().splitlines()) == 4


def test_listing_many_views_reads_the_records_once(tmp_path, monkeypatch, capsys):
    """`views --json` over 300 views reads views.json and tags.json a fixed number of times, not once or more per
    view: 300,000 views (41 MB) ran past 10 minutes (3,000 took 370 s; now 1.4 s) as each view re-read the file."""
    import json

    from vitstudio.core import records as record_files

    data, records = records_folder(tmp_path)
    saved = {f"v{i}": [{"field": "path", "op": "glob", "value": f"{i % 3}.png"}] for i in range(300)}
    (records / "views.json").write_text(json.dumps({"views": saved}))
    reads = []
    real = record_files.read_json_file
    monkeypatch.setattr(record_files, "read_json_file",
                        lambda path, limit=None: reads.append(path) or real(path, limit))
    monkeypatch.setattr(views, "read_json_file", record_files.read_json_file)
    assert main(["views", str(data), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 300 and all(v["images"] == 1 for v in listed.values())
    assert len(reads) <= 4, len(reads)


def _mask(path, size=(32, 32), mode="L", value=1) -> None:
    Image.new(mode, size, value).save(path)


def _truncated(path) -> None:
    import io

    import numpy as np

    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 2, (32, 32), np.uint8), "L").save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue()[:-30])  # the header whole, the pixels cut


def _bomb(path) -> None:
    """A PNG whose header says 30000×30000 (what Pillow's bomb check reads; the pixels are never there)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 30000, 30000, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\0" * 30001)) + chunk(b"IEND", b""))


# a painted mask 1.png (beside a good 0.png) -> what segment's one line says
MASK_SPOILS = {
    "a FIFO": (_fifo, "not a regular file (a FIFO"), "a link to /dev/zero": (_link("/dev/zero"), "not a regular file"),
    "a text file": (_text("hello"), "not an image file"), "an empty file": (_text(""), "file is empty"),
    "a folder": (lambda p: p.mkdir(), "is a folder"), "a dangling link": (_link("/no/such/mask"), "dangling"),
    "a truncated PNG": (_truncated, "corrupt or truncated"), "a 30000×30000 mask": (_bomb, "too large to open safely"),
    "an RGB mask": (lambda p: _mask(p, mode="RGB", value=(1, 1, 1)), "is a RGB image"),
    "1.PNG beside 1.png": (lambda p: (_mask(p), _mask(p.with_suffix(".PNG"))), "both name the image '1'"),
}


@pytest.mark.timeout(60)  # a FIFO opened would block for ever
def test_a_hostile_painted_mask_is_one_line(tmp_path, capsys):
    """`segment --masks` with a mask (1.png) that is a FIFO, a link to /dev/zero, a text or empty file, a folder, a
    dangling link, a truncated PNG, a 30000×30000 header (a bomb), an RGB image, or two masks of one image (1.png
    beside 1.PNG: the second was ignored, unsaid): exit 2, one `error:` line naming the mask and why, at once (the
    FIFO hung; the others were tracebacks); `segment` of a folder that is not there says so (it said a mask 'names
    no image'). [×11 cells in one test]"""
    data = _images(tmp_path / "data")
    base = ["segment", str(data), "--model", TINY_SPEC, "--out", str(tmp_path / "out"), "--quiet"]
    for i, (spoil, (spoiler, says)) in enumerate(MASK_SPOILS.items()):
        masks = tmp_path / f"masks-{i}"
        masks.mkdir()
        _mask(masks / "0.png")
        spoiler(masks / "1.png")
        _one_line(capsys, main([*base, "--masks", str(masks)]), 2, ("painted mask", says), row=spoil)
    argv = ["segment", str(tmp_path / "no" / "such"), *base[2:], "--masks", str(tmp_path / "masks-0")]
    _one_line(capsys, main(argv), 2, "is not a folder of images to segment")
    assert not (tmp_path / "out").exists()


# a Teach project's settings.json -> what its one line says
SETTINGS_SPOILS = {
    '{"seed": "x"}': "seed is \"x\": a whole number", '{"seed": 1e30}': "seed is 1e+30: a whole number",
    '{"seed": -1}': "seed is -1: a whole number", '{"record_fps": "abc"}': "record_fps is \"abc\": frames per second",
    '{"model": ""}': "model is \"\": a model's name or path", '{"model": "a\\u0000b"}': "model is \"a\\u0000b\"",
    '{"augment": "yes"}': "augment is \"yes\": true or false", '{"record_max": 2.5}': "record_max is 2.5",
}


def test_a_hostile_teach_settings_file_is_one_line_before_the_model(tmp_path, monkeypatch, capsys):
    """A project's settings.json with a seed "x", 1e30 or -1, a record_fps "abc", a model "" (it loaded the current
    folder as the model) or holding a NUL, augment "yes", record_max 2.5: `teach` exits 2 with one line naming the
    file, the setting and what it takes, before any model loads (tracebacks before, or 'could not convert string
    to float', 'expected non-negative integer', 'embedded null byte')."""
    from vitstudio.cli import common
    from vitstudio.core.teach.project import SETTINGS, create_project

    def no_model(args):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(common, "_model_from_args", no_model)
    project = create_project(tmp_path / "p", ["ants", "bees"]).root
    make_dataset(project / "images", per_class=2, classes={"ants": (200, 40, 40), "bees": (40, 200, 40)})
    for settings, says in SETTINGS_SPOILS.items():
        (project / SETTINGS).write_text(settings)
        _one_line(capsys, main(["teach", str(project), "--quiet"]), 2, (f"{SETTINGS} is damaged: ", says),
                  row=settings)


def test_a_relative_model_path_in_a_project_is_the_project_s(tmp_path, monkeypatch):
    """settings.json's model "models/run" and weights "w.safetensors" are paths from the project folder, whatever
    folder the command runs in (they were taken from the current folder); a bare timm name stays a name."""
    import json

    from vitstudio.core.teach.project import SETTINGS, read_settings

    (tmp_path / "p" / "models" / "run").mkdir(parents=True)
    (tmp_path / "p" / "w.safetensors").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p" / SETTINGS).write_text(json.dumps({"model": "models/run", "weights": "w.safetensors"}))
    settings = read_settings(tmp_path / "p")
    assert (settings.model, settings.weights) == (str(tmp_path / "p" / "models" / "run"),
                                                  str(tmp_path / "p" / "w.safetensors"))
    (tmp_path / "p" / SETTINGS).write_text(json.dumps({"model": "vit_tiny_patch16_224"}))
    assert read_settings(tmp_path / "p").model == "vit_tiny_patch16_224"


ESCAPED = {"\x1b[31mRED\x1b[0m\x07": "\\x1b[31mRED\\x1b[0m\\x07", "\u202eevil": "\\u202eevil",
           "new\nline": "new\\nline"}


def test_class_names_with_escapes_bidi_overrides_and_line_breaks_are_shown_escaped(tmp_path, capsys):
    """A class folder named ESC[31mRED ESC[0m BEL, one starting with a right-to-left override and one holding a
    newline: every line `teach` prints (per-class accuracy, the validation note, the wrong samples, its refusal of a
    class of one sample) shows them as escapes; no control, C1 or bidi character reaches the terminal and no report
    line is split (they went out raw)."""
    import re

    from tests.core.synthetic_data import make_dataset as made
    from vitstudio.core.files import shown_path

    data = made(tmp_path / "data", per_class=3, classes=dict(zip(ESCAPED, [(220, 40, 40), (40, 200, 60),
                                                                           (40, 60, 220)])))
    assert main(["teach", str(data), "--model", TINY_SPEC, "--quiet"]) in (0, 1)
    out = capsys.readouterr()
    raw = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
    assert not raw.search(out.out + out.err), ascii(out.out + out.err)
    assert all(shown in out.out for shown in ESCAPED.values()), out.out
    assert not any(line.startswith("line") for line in (out.out + out.err).splitlines())
    assert [shown_path(name) for name in ("\x9b2J", "\u2066x\u2069", "a\u2028b")] == [
        "\\u009b2J", "\\u2066x\\u2069", "a\\u2028b"]
    for sample in sorted((data / "\x1b[31mRED\x1b[0m\x07").iterdir())[1:]:
        sample.unlink()  # one sample left: teach refuses, naming the class
    _one_line(capsys, main(["teach", str(data), "--model", TINY_SPEC, "--quiet"]), 2,
              "class \\x1b[31mRED\\x1b[0m\\x07 has one sample")


def test_a_million_bad_rows_are_a_count_not_a_million_lines(tmp_path, capsys):
    """A labels file with 300 rows of missing images besides its good ones: `suggest` names the first 20 and counts
    the rest in one line ('skipped 280 more (file not found)'), where it printed a line per row (a million rows, a
    million lines); the exit is still 1."""
    data = make_dataset(tmp_path / "data", per_class=2)
    rows = [f"{p},{p.parent.name}" for p in sorted(data.rglob("*.png"))] + [f"gone/{i}.png,red" for i in range(300)]
    (tmp_path / "labels.csv").write_text("path,label\n" + "\n".join(rows) + "\n")
    code = main(["suggest", str(data), "--labels", str(tmp_path / "labels.csv"), "--model", TINY_SPEC, "--quiet"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("skipped ")]
    assert code == 1 and len(lines) == 21 and lines[-1] == "skipped 280 more (file not found)", lines[-3:]


@pytest.mark.timeout(30)
def test_reading_a_record_opens_only_a_bounded_regular_file(tmp_path):
    """records.read_regular_file: a FIFO and a link to /dev/zero are refused without being read (no block, no
    MemoryError), a file over the limit is refused from its size, and the bytes of one within it come back."""
    import os

    from vitstudio.core.records import UnreadableFile, read_regular_file

    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    (tmp_path / "big").write_bytes(b"x" * 101)
    for name, says in (("fifo", "a FIFO"), ("zero", "through a symbolic link to /dev/zero"), ("big", "larger than")):
        with pytest.raises(UnreadableFile, match=says):
            read_regular_file(tmp_path / name, 100)
    assert read_regular_file(tmp_path / "big", 101) == b"x" * 101


def test_an_output_where_no_folder_can_be_made_is_one_line(tmp_path, capsys):
    """`segment --out afile/sub` and `teach --export afile/sub` (a file where a folder must be: NotADirectoryError
    and FileExistsError tracebacks) are one line before the model loads; `teach --export /proc/self/x` (no folder
    can be made there) is one line after the teaching, exit 2."""
    data = _images(tmp_path / "data")
    (tmp_path / "masks").mkdir()
    _mask(tmp_path / "masks" / "0.png")
    (tmp_path / "afile").write_text("a file")
    argv = ["segment", str(data), "--masks", str(tmp_path / "masks"), "--out", str(tmp_path / "afile" / "sub")]
    _one_line(capsys, main([*argv, "--model", TINY_SPEC, "--quiet"]), 2, "afile is a file, not a folder")
    project = make_dataset(tmp_path / "p", per_class=2, classes={"ants": (200, 40, 40), "bees": (40, 200, 40)})
    for out, says, progress in ((str(tmp_path / "afile" / "sub"), "afile is a file, not a folder", False),
                                ("/proc/self/x", "could not write the export into /proc/self/x", True)):
        code = main(["teach", str(project), "--model", TINY_SPEC, "--export", out, "--quiet"])
        _one_line(capsys, code, 2, says, progress=progress, row=out)


@pytest.mark.timeout(60)  # a FIFO read would block for ever
def test_a_labels_file_that_is_a_fifo_or_a_device_is_one_line(tmp_path, capsys):
    """`suggest --labels` naming a FIFO or a link to /dev/zero: one line saying it is no regular file, exit 2 (the
    FIFO hung, /dev/zero was read until memory ran out)."""
    import os

    data = make_dataset(tmp_path / "data", per_class=2)
    os.mkfifo(tmp_path / "fifo.csv")
    os.symlink("/dev/zero", tmp_path / "zero.csv")
    for name, says in (("fifo.csv", "a FIFO"), ("zero.csv", "through a symbolic link to /dev/zero")):
        code = main(["suggest", str(data), "--labels", str(tmp_path / name), "--model", TINY_SPEC, "--quiet"])
        _one_line(capsys, code, 2, (f"{name} is not a regular file", says, "a labels file must be one"), row=name)
