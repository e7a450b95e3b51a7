"""`vitstudio explain`: raw arrays equal the core's, every parameter is recorded, pictures are written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from tests.conftest import TINY_SPEC
from vitstudio.cli import main
from vitstudio.core.analysis import attention
from vitstudio.core.analysis.explain import render
from vitstudio.core.analysis.registry import REGISTRY
from vitstudio.core.data.images import read_image
from vitstudio.core.models.loading import load_model


@pytest.fixture
def model_args(tiny_weights):
    return ["--model", TINY_SPEC, "--weights", str(tiny_weights[0])]


def _x(loaded, path):
    return loaded.to_tensor(loaded.crop(read_image(path)))[None]


def test_npy_is_the_raw_array(model_args, tiny_weights, photos, tmp_path):
    """`--method rollout/heads --out x.npy` writes float32 arrays equal to core rollout/head_maps; the .json sidecar
    records fusion, discard, shape.
    """
    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    x = _x(loaded, photos["chelsea"])
    out = tmp_path / "r.npy"
    assert main(["explain", str(photos["chelsea"]), *model_args, "--method", "rollout", "--fusion", "max",
                 "--discard", "0.5", "--out", str(out)]) == 0
    arr = np.load(out)
    assert arr.dtype == np.float32
    np.testing.assert_array_equal(arr, attention.rollout(loaded, x, "max", 0.5)[0])
    sidecar = json.loads((tmp_path / "r.npy.json").read_text())  # the parameters travel with the array
    assert sidecar["params"]["fusion"] == "max" and sidecar["params"]["discard"] == 0.5 and sidecar["shape"] == [4, 4]
    out = tmp_path / "h.npy"
    assert main(["explain", str(photos["chelsea"]), *model_args, "--method", "heads", "--layer", "0",
                 "--head", "1", "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), attention.head_maps(loaded, x, 0)[0, 1])


def test_json_records_every_parameter(model_args, photos, tmp_path):
    """JSON output records method, resolved layer, patch, model, shape and array; gradient-rollout records `--class` as
    target.
    """
    out = tmp_path / "t.json"
    assert main(["explain", str(photos["astronaut"]), *model_args, "--method", "token", "--patch", "1,2",
                 "--layer", "-1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    p = doc["params"]
    assert p["method"] == "token" and p["layer"] == 1 and p["patch"] == [1, 2] and p["model"] == TINY_SPEC
    assert doc["shape"] == [2, 2, 4, 4] and np.asarray(doc["array"]).shape == (2, 2, 4, 4)
    out = tmp_path / "g.json"
    assert main(["explain", str(photos["astronaut"]), *model_args, "--method", "gradient-rollout", "--class", "3",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["params"]["target"] == 3


@pytest.mark.parametrize("method", [m for m in REGISTRY if m != "text"])  # text needs a text tower: test_openclip
def test_every_method_writes_a_png(model_args, photos, tmp_path, method):
    """Every registered method except text writes an RGB PNG of at least 32 px (the concept map after `vitstudio
    concepts` learned a file for the model). [parametrised ×14]
    """
    out = tmp_path / f"{method}.png"
    image = [] if method in ("pos-embed", "filters") else [str(photos["coffee"])]
    extra = []
    if method == "concept":  # a concept map reads concepts learned on this model first
        assert main(["concepts", str(photos["coffee"].parent), *model_args, "--size", "8", "--k", "2", "--epochs", "1",
                     "--out", str(tmp_path / "c"), "--quiet"]) == 0
        extra = ["--concepts", str(tmp_path / "c"), "--concept", "0"]
    patch = ["--patch", "2,3"] if REGISTRY[method].param("patch") else []  # an option it does not take: refused
    assert main(["explain", *image, *model_args, "--method", method, *patch, *extra, "--out", str(out)]) == 0
    picture = Image.open(out)
    assert picture.mode == "RGB" and min(picture.size) >= 32


def test_distance_over_a_folder_is_the_mean(model_args, tiny_weights, photos, tmp_path):
    """distance/entropy over a folder equal the mean of per-image core attention_stats; `images` = 3."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for name in ("astronaut", "rocket", "coffee"):
        (folder / photos[name].name).write_bytes(photos[name].read_bytes())
    out = tmp_path / "d.json"
    assert main(["explain", str(folder), *model_args, "--method", "distance", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    per_image = [attention.attention_stats(loaded, _x(loaded, folder / photos[n].name))
                 for n in ("astronaut", "rocket", "coffee")]
    np.testing.assert_allclose(doc["array"], np.mean([s.distance for s in per_image], 0), rtol=1e-5)
    np.testing.assert_allclose(doc["entropy"], np.mean([s.entropy for s in per_image], 0), rtol=1e-5)
    assert doc["params"]["images"] == 3


def test_explain_errors(model_args, photos, tmp_path, capsys):
    """Missing `--patch`, out-of-range layer, unsupported output extension, no image → exit 2; missing file → exit 1."""
    assert main(["explain", str(photos["coffee"]), *model_args, "--method", "token", "--out",
                 str(tmp_path / "x.npy")]) == 2
    assert "--patch is required" in capsys.readouterr().err
    assert main(["explain", str(photos["coffee"]), *model_args, "--method", "heads", "--layer", "5",
                 "--out", str(tmp_path / "x.npy")]) == 2
    assert "out of range" in capsys.readouterr().err
    assert main(["explain", str(photos["coffee"]), *model_args, "--method", "heads", "--out", "x.txt"]) == 2
    assert main(["explain", str(tmp_path / "nope.jpg"), *model_args, "--method", "heads", "--out",
                 str(tmp_path / "x.npy")]) == 2  # refused while parsing
    assert main(["explain", *model_args, "--method", "rollout", "--out", str(tmp_path / "x.npy")]) == 2


def test_render_shapes(tiny_weights, photos):
    """`render` returns a uint8 RGB picture wider than the crop."""
    from vitstudio.core.analysis.explain import explain

    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    exp = explain(loaded, "heads", read_image(photos["rocket"]))
    picture = render(exp)
    assert picture.dtype == np.uint8 and picture.shape[2] == 3 and picture.shape[1] > exp.crop.shape[1]


def test_write_result_formats(tmp_path):
    """CSV export rows and JSON sidecar with numpy types converted; 3-D CSV and unknown extension raise ValueError."""
    from vitstudio.core.analysis.export import write_result

    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    files = write_result(tmp_path / "a.csv", arr, {"layer": np.int64(3), "patch": (1, 2)})
    assert [f.name for f in files] == ["a.csv", "a.csv.json"]
    assert (tmp_path / "a.csv").read_text().splitlines()[1] == "3.0,4.0,5.0"
    assert json.loads(files[1].read_text())["params"] == {"layer": 3, "patch": [1, 2]}
    with pytest.raises(ValueError, match="1-D or 2-D"):
        write_result(tmp_path / "b.csv", np.zeros((2, 2, 2)), {})
    with pytest.raises(ValueError, match="data export"):
        write_result(tmp_path / "b.txt", arr, {})


def test_several_images_and_methods_in_one_call(model_args, tiny_weights, photos, tmp_path):
    """One model load, every image x method written as OUT/<image file name>.<method>.<format>; a folder is
    expanded.

    Several images/folders × methods write OUT/<file>.<method>.npy equal to core results; sidecar params; a folder is a
    batch; one file for many results is exit 2; a folder with a dot in its name ("maps.v2", existing or not) is a folder
    (issue 29, item 19).
    """
    folder = tmp_path / "imgs"
    folder.mkdir()
    for name in ("rocket", "coffee"):
        (folder / photos[name].name).write_bytes(photos[name].read_bytes())
    out = tmp_path / "out"
    assert main(["explain", str(photos["chelsea"]), str(folder), *model_args, "--method", "rollout,norms",
                 "--method", "pos-embed", "--out", str(out), "--format", "npy"]) == 0
    names = sorted(p.name for p in out.glob("*.npy"))
    assert names == ["chelsea.png.norms.npy", "chelsea.png.rollout.npy", "coffee.jpg.norms.npy",
                     "coffee.jpg.rollout.npy", "pos-embed.npy", "rocket.jpg.norms.npy", "rocket.jpg.rollout.npy"]
    loaded = load_model(TINY_SPEC, weights=tiny_weights[0])
    np.testing.assert_array_equal(np.load(out / "coffee.jpg.rollout.npy"),
                                  attention.rollout(loaded, _x(loaded, photos["coffee"]))[0])
    from vitstudio.core.analysis import embeddings

    tokens = embeddings.layer_tokens(loaded, _x(loaded, photos["rocket"]))[1]
    np.testing.assert_allclose(np.load(out / "rocket.jpg.norms.npy"), embeddings.token_norms(tokens)[0][0], rtol=1e-6)
    side = json.loads((out / "rocket.jpg.norms.npy.json").read_text())["params"]
    assert side["method"] == "norms" and side["title"] == "Token norms" and side["layer"] == 1
    # a folder given to a per-image method is a batch, not an error
    assert main(["explain", str(folder), *model_args, "--method", "rollout", "--out", str(tmp_path / "f")]) == 0
    assert len(list((tmp_path / "f").glob("*.rollout.png"))) == 2
    # one file named for several results is a usage error, before the model is loaded
    assert main(["explain", str(folder), *model_args, "--method", "rollout", "--out", str(tmp_path / "x.png")]) == 2
    # a folder with a dot in its name is a folder, existing or not (issue 29, item 19)
    for dotted in (tmp_path / "maps.v2", tmp_path / "new.v3"):
        (tmp_path / "maps.v2").mkdir(exist_ok=True)
        assert main(["explain", str(photos["chelsea"]), *model_args, "--method", "rollout", "--out", str(dotted)]) == 0
        assert [p.name for p in dotted.iterdir()] == ["chelsea.png.rollout.png"]


def test_an_image_is_read_once_for_all_its_methods(model_args, photos, tmp_path, monkeypatch):
    """`explain IMAGE --method a,b,c` decodes the image once, not once per method (the seam matrix's explain cells
    decoded their photo ~20 times per call); each method's file still equals a call of its own."""
    from vitstudio.core.data import images

    reads = []
    read = images.read_image
    monkeypatch.setattr(images, "read_image", lambda path, *a, **k: reads.append(path) or read(path, *a, **k))
    methods = "rollout,norms,heads"
    assert main(["explain", str(photos["chelsea"]), *model_args, "--method", methods, "--out", str(tmp_path / "all"),
                 "--format", "npy"]) == 0
    assert len(reads) == 1
    for method in methods.split(","):
        assert main(["explain", str(photos["chelsea"]), *model_args, "--method", method, "--out",
                     str(tmp_path / f"{method}.npy")]) == 0
        np.testing.assert_array_equal(np.load(tmp_path / "all" / f"chelsea.png.{method}.npy"),
                                      np.load(tmp_path / f"{method}.npy"))


def test_pngs_are_readable_with_a_colour_bar(model_args, photos, tmp_path):
    """Rollout PNG ≥ 300 px and has a many-coloured colour-bar column on the right."""
    out = tmp_path / "r.png"
    assert main(["explain", str(photos["coffee"]), *model_args, "--method", "rollout", "--out", str(out)]) == 0
    picture = np.asarray(Image.open(out))
    assert min(picture.shape[:2]) >= 300  # not the model's 32-px crop
    # a colour bar: a tall column whose colour changes monotonically down the figure, right of the map
    right = picture[:, int(picture.shape[1] * 0.75):]
    assert len(np.unique(right.reshape(-1, 3), axis=0)) > 50


def test_cli_vocabulary_is_the_registry():
    """Explain help names every registered analysis; every option of every command has help text."""
    from vitstudio.cli import build_parser

    explain = build_parser()._subparsers._group_actions[0].choices["explain"]
    text = explain.format_help()
    for analysis in REGISTRY.values():
        assert analysis.name in text
    for name, sub in build_parser()._subparsers._group_actions[0].choices.items():  # every command's options
        undocumented = [a.dest for a in sub._actions if a.dest != "help" and not a.help]
        assert not undocumented, (name, undocumented)


def test_help_and_broken_pipe_without_traceback(tmp_path, forked_cli):
    """`--help` imports neither torch nor timm; `models | head -2` ends without traceback/BrokenPipe (exit 0):
    `vitstudio models` forked from the warm CLI server with its stdout a FIFO the test leaves after two lines of ~59 KB
    (was `python -m vitstudio models | head -2` through a shell, which imported timm again; a stdout the child cannot
    flush at its end is reported as Python reports it). [subprocess] [subprocess: forked warm]
    """
    import os
    import select
    import subprocess
    import sys

    code = "import sys; from vitstudio.cli import main; main(['--help'])\n" \
           "print('torch' in sys.modules, 'timm' in sys.modules, file=sys.stderr)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stderr.strip().endswith("False False"), res.stderr  # --help imports neither torch nor timm
    # `vitstudio models | head -2`: the command forked from the warm CLI server (SIGPIPE ignored, as Python sets it
    # at start; a fresh interpreter only imported timm again), its stdout a pipe (FIFO) this test leaves after two
    # lines, while ~59 KB are still to come
    pipe = tmp_path / "stdout"
    os.mkfifo(pipe)
    forked_cli.start(["models"], stdout=pipe)
    reader, head = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK), b""  # never waits for a child that died first
    try:
        while head.count(b"\n") < 2 and select.select([reader], [], [], 60)[0]:
            chunk = os.read(reader, 4096)
            if not chunk:
                break
            head += chunk
    finally:
        os.close(reader)
    res = forked_cli.wait()
    assert len(head.splitlines()) >= 2, head
    assert res.returncode == 0 and "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr
