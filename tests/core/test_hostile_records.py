"""Hostile records, masks, settings and names, one line each (the bad-input seam's second half; the commands × model
inputs are tests/core/test_seam_bad_inputs.py): a record (tags.json, views.json, labels files, settings) that is a
FIFO, a device, too large or of the wrong shape is refused or set aside in one line without being read; a painted
mask that is not an image one line; class names with escapes, bidi overrides and line breaks shown escaped; a
million bad rows a count."""

from __future__ import annotations

import json
import os

import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset
from tests.core.test_hostile_adapters import adapter  # noqa: F401 (the fixture: a good adapter folder, spoilt per cell)
from tests.core.test_seam_bad_inputs import _images, _one_line
from vitstudio.cli import main
from vitstudio.core.folder import view_select, views


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

    data, records = records_folder(tmp_path)
    _one_line(capsys, main(["views", str(data), "--save", "x" * 10_000, "--path", "*"]), 2, "at most 200 characters")
    (records / "views.json").write_text(json.dumps({"views": {"y" * 10_000: [{"field": "path", "op": "glob",
                                                                               "value": "*"}]}}))
    target = view_select.view_labels_file(data, "y" * 10_000)
    assert len(target.name) < 100 and len(target.read_text().splitlines()) == 4


def test_listing_many_views_reads_the_records_once(tmp_path, monkeypatch, capsys):
    """`views --json` over 300 views reads views.json and tags.json a fixed number of times, not once or more per
    view: 300,000 views (41 MB) ran past 10 minutes (3,000 took 370 s; now 1.4 s) as each view re-read the file."""

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
