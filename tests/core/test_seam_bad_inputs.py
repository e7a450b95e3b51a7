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
import shutil

import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from tests.core import test_concepts_files as concepts_files
from tests.core import test_hostile_adapters as hostile_adapters
from tests.core.seam_rows import one_parser  # noqa: F401 - a fixture
from tests.core.synthetic_data import make_dataset
from tests.core.test_hostile_adapters import adapter  # noqa: F401 (the fixture: a good adapter folder, spoilt per cell)
from tests.core.test_non_utf8_classes import non_utf8_dataset
from vitstudio.cli import main
from vitstudio.cli.app import build_parser
from vitstudio.core.folder import views

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
# the ~600 in-process calls share one parser (seam_rows.one_parser): building it is ~11 ms, once per process for
# a user; _takes_model reads a parser of its own
pytestmark = pytest.mark.usefixtures("one_parser")


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
