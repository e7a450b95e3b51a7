"""How a file name is shown (issue 29, items 15 and 19): one function (`files.shown_path`) keeps any name the file
system allows on one line of a report or a terminal: control characters as escapes, bytes that are not UTF-8 as
\\xNN; the audit report and `predict`'s lines use it."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from vitstudio.core.files import shown_path
from vitstudio.core.folder.audit import AuditReport


def test_control_characters_and_non_utf8_bytes_are_escaped_and_nothing_else():
    """newline, tab, CR, ESC, DEL as escapes; non-UTF-8 bytes as \\xNN; other Unicode as it is."""
    assert shown_path("a\nb\tc\rd\x1be\x7f.png") == "a\\nb\\tc\\rd\\x1be\\x7f.png"
    assert shown_path(os.fsdecode(b"caf\xe9.png")) == "caf\\xe9.png"
    assert shown_path("über straße 東京.png") == "über straße 東京.png"


def test_a_newline_in_a_file_name_keeps_the_audit_report_one_line_per_file():
    """The audit report's unreadable-files lines keep a name with a newline on its line."""
    report = AuditReport("/data", 3, ("a", "b"), "train/val", (), errors=(("/data/a/two\nlines.png", "truncated"),
                                                                          ("/data/b/ok.png", "not an image")))
    lines = report.describe().splitlines()
    assert "  /data/a/two\\nlines.png: truncated" in lines and "  /data/b/ok.png: not an image" in lines
    assert not any(line.startswith("lines.png") for line in lines)


@pytest.mark.skipif(sys.platform != "linux", reason="a newline in a file name: Linux file systems allow it")
def test_predict_prints_each_image_on_its_own_line_whatever_its_name(tmp_path, capsys):
    """`predict`'s printed result for "two\\nlines.png": the name on one line, then its rows. [Linux only]"""
    from vitstudio.cli import main
    from vitstudio.core.models.demo import bundled_demo, sample_images

    folder = tmp_path / "images"
    folder.mkdir()
    shutil.copy(sample_images()[0], folder / "two\nlines.png")
    assert main(["predict", str(folder), "--model", str(bundled_demo()), "--topk", "2", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == shown_path(folder / "two\nlines.png") and out[0].endswith("two\\nlines.png")
    assert len(out) == 4  # the name, two classes, the out-of-distribution line


@pytest.mark.skipif(sys.platform != "linux", reason="file names that are not UTF-8: Linux file systems allow them")
def test_a_name_that_is_not_utf8_goes_through_every_command(tmp_path, forked_cli):
    """explain draws its figure (matplotlib cannot draw the raw bytes), finetune trains on a folder holding it (its
    image cache key hashed the name as UTF-8 text), suggest and sort show it escaped like every other report.

    A folder holding a Latin-1 name: `finetune` trains on it (the image cache hashed names as UTF-8 text), `explain`
    draws its PNG (matplotlib's title), `suggest` and `sort --dry-run` show it as `\\xe9\\xff` like every report (issue
    29, item 15). [subprocess: forked warm] [fine-tune] [Linux only]
    """
    from PIL import Image

    from tests.core.synthetic_data import COLOURS, make_dataset

    data = make_dataset(tmp_path / "data", per_class=6, size=40, classes={k: COLOURS[k] for k in ("red", "blue")})
    odd = os.fsdecode(os.fsencode(str(data / "red")) + b"/caf\xe9\xff.png")
    shutil.copy(next((data / "red").glob("*.png")), odd)
    shown = shown_path(odd)
    assert "\\xe9\\xff" in shown
    run = tmp_path / "run"
    result = forked_cli.run(["finetune", str(data), "--model", "custom:img=32,patch=8,width=32,depth=2,heads=2,"
                             "classes=2", "--out", str(run), "--preset", "scratch", "--epochs", "1", "--quiet"])
    assert result.returncode == 0, result.stderr
    for args in (["explain", "--method", "rollout", "--model", str(run), odd, "--out", str(tmp_path / "maps")],
                 ["suggest", "--model", str(run), str(data), "--n", "100"],
                 ["sort", "--model", str(run), str(data), "--out", str(tmp_path / "sorted"), "--dry-run"]):
        result = forked_cli.run(args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result)
        lines = [line for line in (result.stdout + result.stderr).splitlines() if "caf" in line]
        assert lines and all(shown in line or shown_path(tmp_path) in line for line in lines), (args, lines)
        assert not any("\udce9" in line or "\ufffd" in line for line in lines), (args, lines)
    picture = os.fsencode(str(tmp_path / "maps")) + b"/caf\xe9\xff.png.rollout.png"
    assert Image.open(os.fsdecode(picture)).size[0] > 300


def test_a_count_agrees_with_its_noun():
    """The afternoon walk: "1 images the model doubts", "Class of the 1 selected images".

    `files.counted`: "1 image", "2 images", used by every count the window says ("1 images the model doubts": the
    afternoon walk).
    """
    from vitstudio.core.files import counted

    assert [counted(n, "image") for n in (0, 1, 2)] == ["0 images", "1 image", "2 images"]
