"""The command line's words: a count says its noun in the singular for one (through core/files.counted, the one
plural helper), and `models` labels its columns."""

from __future__ import annotations

from PIL import Image

from tests.conftest import TINY_SPEC
from vitstudio.cli import main
from vitstudio.core.files import counted


def test_counted_says_one_thing_in_the_singular():
    """'1 class', '2 classes', '1 model', '0 models': the helper every printed count goes through."""
    assert [counted(n, "class", "classes") for n in (0, 1, 2)] == ["0 classes", "1 class", "2 classes"]
    assert [counted(n, "model") for n in (0, 1, 2)] == ["0 models", "1 model", "2 models"]


def test_one_of_a_kind_is_said_in_the_singular_and_models_has_headers(tmp_path, tiny_weights, capsys):
    """`models` with one match printed '1 models' and columns 'local local' without headers; one image embedded
    was '1 images embedded'; one failed input of one, '1 of 1 inputs failed'."""
    assert main(["models", "--filter", "deit_tiny_patch16_224.fb_in1k"]) == 0
    out = capsys.readouterr()
    header, row = out.out.splitlines()
    assert header.split() == ["model", "family", "weights"] and row.split()[:2] == ["deit_tiny_patch16_224.fb_in1k",
                                                                                   "deit"]
    assert row.index(" deit ") + 1 == header.index("family") and out.err.strip().splitlines()[-1] == "1 model"
    Image.new("RGB", (32, 32), (200, 30, 90)).save(tmp_path / "a.png")
    model = ["--model", TINY_SPEC, "--weights", str(tiny_weights[0])]
    assert main(["embed", str(tmp_path / "a.png"), *model, "--quiet"]) == 0
    assert "1 image embedded (1 computed, 0 from the cache)" in capsys.readouterr().err
    (tmp_path / "b.jpg").write_bytes(b"not a jpeg")
    assert main(["predict", str(tmp_path / "b.jpg"), *model, "--quiet"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == "1 of 1 input failed"
