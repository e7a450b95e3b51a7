"""Issue 18: every input reported, none takes the command down. A folder of hostile files beside good photos goes
through predict, embed and explain with both decoders, each in a process of its own capped at 4 GiB of address
space: the good images get their results, every bad one is reported with its reason, the exit code is 1, never a
traceback. The safe reader, the folder walk and the dataset scan are checked one by one below."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vitstudio.core.data import tensor_decode
from vitstudio.core.data.datasets import DatasetError, scan_dataset
from vitstudio.core.data.images import MAX_ASPECT, ImageReadError, expand_paths, image_size, read_image

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and RLIMIT_AS are POSIX")

SPEC = "custom:img=224,patch=16,width=32,depth=2,heads=2,classes=5"  # real-size preprocessing (resize to 248)
LIMIT = 4 << 30  # address space of each CLI process; the old code needed 3.5–5 GB for one hostile file

# hostile entry -> a piece of the reason every command must print for it
BAD = {
    "bomb.jpg": "too large to open safely",
    "fifo.jpg": "not a regular file (a FIFO",
    "zero.jpg": "not a regular file (a character device, through a symbolic link)",
    "dangling.jpg": "dangling symbolic link",
    "loop_a.jpg": "symbolic link loop",
    "x.jpg": "is a folder",
    "phone.heic": "HEIC is not supported; convert to JPEG/PNG",
    "empty.jpg": "empty",
    "text.jpg": "not an image file",
    "trunc.jpg": "truncated",
    "huge.jpg": "file too large",
    "again": "symbolic link loop",
}
GOOD = ("astronaut.jpg", "chelsea.png", "small.bmp", "small.webp", "thin.png", "wide.png", "thin.jpg")


def bomb_jpeg(side: int = 30000) -> bytes:
    """A 300-byte JPEG whose frame header declares side × side pixels (torchvision decodes it: 2.7 GB)."""
    buf = io.BytesIO()
    Image.new("L", (16, 16), 128).save(buf, "JPEG", quality=50)
    data = bytearray(buf.getvalue())
    i = 2
    while data[i + 1] not in tensor_decode._SOF:
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    data[i + 5:i + 9] = side.to_bytes(2, "big") * 2
    return bytes(data)


def make_hostile(folder: Path, photos: dict) -> Path:
    folder.mkdir(parents=True)
    for name in ("astronaut", "chelsea"):
        (folder / photos[name].name).write_bytes(photos[name].read_bytes())
    small = Image.fromarray(np.asarray(Image.open(photos["coffee"]).convert("RGB"))[::8, ::8])
    small.save(folder / "small.bmp")
    small.save(folder / "small.webp")  # same stem: explain must not overwrite one with the other
    Image.new("RGB", (1, 60000), (200, 10, 10)).save(folder / "thin.png")  # 320 bytes
    Image.new("RGB", (60000, 1), (10, 200, 10)).save(folder / "wide.png")
    Image.new("RGB", (1, 60000), (10, 10, 200)).save(folder / "thin.jpg")  # the tensor decoder's own path
    (folder / "bomb.jpg").write_bytes(bomb_jpeg())
    os.mkfifo(folder / "fifo.jpg")
    os.symlink("/dev/zero", folder / "zero.jpg")
    os.symlink(folder / "missing.jpg", folder / "dangling.jpg")
    os.symlink(folder / "loop_b.jpg", folder / "loop_a.jpg")
    os.symlink(folder / "loop_a.jpg", folder / "loop_b.jpg")
    (folder / "x.jpg").mkdir()
    (folder / "phone.heic").write_bytes(b"\x00\x00\x00\x18ftypheic" + bytes(64))
    (folder / "empty.jpg").write_bytes(b"")
    (folder / "text.jpg").write_text("not an image")
    data = photos["astronaut"].read_bytes()
    (folder / "trunc.jpg").write_bytes(data[: len(data) // 3])
    with open(folder / "huge.jpg", "wb") as f:  # sparse: 1 GiB + 1 byte without using the disk
        f.write(data[:4096])
        f.truncate((1 << 30) + 1)
    os.symlink(folder, folder / "again")  # a folder link back to itself
    (folder / "notes.txt").write_text("a note")  # not an image: listed as ignored, not a failure
    return folder


@pytest.fixture(scope="module", params=["pil", "tensor"])
def hostile(request, tmp_path_factory, photos, forked_cli) -> dict:
    """predict, embed and explain over the hostile folder with one decoder: command -> its result (and the files
    it wrote under `root`). Each command in a process of its own capped at LIMIT (forked from the warm server of
    tests/core/forked_cli.py: what `python -m vitstudio` runs, its torch and timm already in the address space the
    cap counts, without importing them again per command)."""
    import timm
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp(f"hostile-{request.param}")
    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=224, patch_size=16, embed_dim=32,
                              depth=2, num_heads=2, num_classes=5)
    weights = root / "w.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    folder = make_hostile(root / "in", photos)
    common = [str(folder), "--model", SPEC, "--weights", str(weights), "--device", "cpu", "--decoder", request.param]
    commands = dict(predict=["predict", *common, "--json"],
                    embed=["embed", *common, "--out", str(root / "e.npz"), "--quiet"],
                    explain=["explain", *common, "--method", "rollout", "--out", str(root / "out"), "--format", "npy"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    results = {name: forked_cli.run(args, env, address_space=LIMIT) for name, args in commands.items()}
    return dict(results, root=root)


def _assert_reported(lines: dict[str, str]) -> None:
    """`lines` maps a file name to what was printed for it; every bad one is there with its reason."""
    for name, reason in BAD.items():
        assert reason in lines.get(name, ""), (name, lines.get(name))
    assert BAD["loop_a.jpg"] in lines["loop_b.jpg"]


def test_predict_reports_every_bad_input_and_classifies_the_rest(hostile):
    """`predict --json` under a 4 GiB RLIMIT_AS (predict, embed and explain each in a capped process of its own forked
    from the warm server per decoder, the module fixture `hostile`: no interpreter start, was 2): good images get top-5,
    every bad one its reason, .txt listed not failed, exit 1, no traceback. [subprocess: forked warm] [parametrised ×2:
    pil/tensor decoder]
    """
    r = hostile["predict"]
    assert r.returncode == 1, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    records = {Path(rec["path"]).name: rec for rec in map(json.loads, r.stdout.splitlines())}
    for name in GOOD:
        assert len(records[name]["top"]) == 5, records[name]
    _assert_reported({n: rec.get("error", "") for n, rec in records.items()})
    assert "notes.txt" not in records and "not an image file (.txt)" in r.stderr  # listed, not a failure
    assert f"{len(BAD) + 1} of {len(BAD) + 1 + len(GOOD)} inputs failed" in r.stderr


def test_embed_reports_every_bad_input_and_embeds_the_rest(hostile):
    """`embed` under the cap: every bad file reported with its reason; the npz holds exactly the good files with finite
    features. [subprocess: forked warm] [parametrised ×2]
    """
    r = hostile["embed"]
    assert r.returncode == 1, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    printed = {}
    for line in r.stderr.splitlines():
        path, _, reason = line.partition(": ")
        printed[Path(path).name] = reason
    _assert_reported(printed)
    saved = np.load(hostile["root"] / "e.npz")
    assert sorted(Path(p).name for p in saved["paths"]) == sorted(GOOD)
    assert np.isfinite(saved["features"]).all()


def test_explain_reports_every_bad_input_and_names_results_uniquely(hostile):
    """`explain rollout` under the cap: bad files reported, one result per good file (small.bmp/small.webp not
    overwritten). [subprocess: forked warm] [parametrised ×2]
    """
    r = hostile["explain"]
    out = hostile["root"] / "out"
    assert r.returncode == 1, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    printed = {}
    for line in r.stderr.splitlines():
        if line.startswith("error: "):
            path, _, reason = line[len("error: "):].partition(": ")
            printed[Path(path).name] = reason
    _assert_reported(printed)
    assert sorted(p.name for p in out.glob("*.npy")) == sorted(f"{name}.rollout.npy" for name in GOOD)
    assert not np.array_equal(np.load(out / "small.bmp.rollout.npy"), np.load(out / "thin.png.rollout.npy"))


def test_explain_names_are_unique_per_input_path(tmp_path, photos, tiny_weights):
    """small.bmp and small.webp, and two small.bmp from different folders: three results, none overwritten.

    Same stems in one or two folders give small.bmp, small.bmp-2, small.webp results; sidecar names the right source
    image.
    """
    from tests.conftest import TINY_SPEC
    from vitstudio.cli import main

    img = Image.open(photos["coffee"]).convert("RGB").resize((48, 40))
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        img.save(tmp_path / sub / "small.bmp")
    img.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(tmp_path / "a" / "small.webp")
    out = tmp_path / "out"
    args = ["--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--method", "rollout", "--format", "npy"]
    assert main(["explain", str(tmp_path / "a"), str(tmp_path / "b"), *args, "--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.npy")) == ["small.bmp-2.rollout.npy", "small.bmp.rollout.npy",
                                                         "small.webp.rollout.npy"]
    image = json.loads((out / "small.bmp-2.rollout.npy.json").read_text())["params"]["image"]
    assert image == str(tmp_path / "b" / "small.bmp")


def test_reader_reasons_without_decoding(tmp_path, photos):
    """`read_image` raises ImageReadError with each expected reason; `image_size` refuses all but truncated;
    `tensor_decode.read_bytes` errors except for bomb/text/truncated.
    """
    folder = make_hostile(tmp_path / "in", photos)
    for name, reason in BAD.items():
        with pytest.raises(ImageReadError) as info:
            read_image(folder / name)
        assert reason in info.value.reason, (name, info.value.reason)
        if name != "trunc.jpg":  # the header alone tells the rest
            with pytest.raises(ImageReadError):
                image_size(folder / name)
        _, data, err = tensor_decode.read_bytes(str(folder / name))
        assert (err is None) == (name in ("bomb.jpg", "text.jpg", "trunc.jpg")), (name, err)


def test_the_tensor_decoder_refuses_a_bomb_from_its_header(monkeypatch):
    """The JPEG's frame header is read before torchvision decodes: the bomb never reaches decode_jpeg.

    `jpeg_size` reads 30000×30000 from the header and `decode` refuses it without calling torchvision decode_jpeg.
    """
    data = bomb_jpeg()
    assert tensor_decode.jpeg_size(data) == (30000, 30000)
    import torchvision.io

    def boom(*a, **k):
        raise AssertionError("decode_jpeg called on a bomb")

    monkeypatch.setattr(torchvision.io, "decode_jpeg", boom)
    [(path, image, err)] = tensor_decode.decode([("bomb.jpg", data, None)], torch.device("cpu"))
    assert image is None and "too large to open safely (30000×30000" in err


def test_thin_images_become_sane_inputs(tmp_path):
    """A 1×60000 strip keeps its 1×16 centre (PIL) and the same crop on the tensor path, so the resize to a model's
    size costs kilobytes instead of gigabytes."""
    Image.new("RGB", (1, 60000), (200, 10, 10)).save(tmp_path / "thin.png")
    img = read_image(tmp_path / "thin.png")
    assert img.size == (1, MAX_ASPECT)
    config = dict(input_size=(3, 224, 224), crop_pct=0.9, interpolation="bicubic", mean=(0.5,) * 3, std=(0.5,) * 3)
    x = tensor_decode.eval_preprocess(torch.full((3, 60000, 1), 200, dtype=torch.uint8), config)
    assert x.shape == (3, 224, 224)
    normal = read_image(tmp_path / "thin.png")  # an ordinary photo is untouched
    Image.new("RGB", (300, 200)).save(tmp_path / "ok.png")
    assert read_image(tmp_path / "ok.png").size == (300, 200) and normal.mode == "RGB"


def test_folder_walk_yields_every_unusable_entry_and_lists_other_files(tmp_path, photos):
    """`expand_paths` yields every good and bad entry (incl. loop_b) and lists notes.txt as ignored."""
    folder = make_hostile(tmp_path / "in", photos)
    ignored: list = []
    names = sorted(p.name for p in expand_paths([folder], ignored=ignored))
    assert names == sorted([*GOOD, *BAD, "loop_b.jpg"])
    assert ignored == [(str(folder / "notes.txt"), "not an image file (.txt)")]


def test_dataset_scan_lists_every_unusable_path_with_its_reason(tmp_path, photos):
    """`scan_dataset` skips every bad file with its reason, a stray top-level file and notes.txt; train keeps good files
    and the truncated one.
    """
    root = tmp_path / "data"
    make_hostile(root / "cat", photos)
    (root / "dog").mkdir()
    for k in range(3):
        (root / "dog" / f"{k}.png").write_bytes(photos["chelsea"].read_bytes())
    (root / "stray.jpg").write_bytes(photos["coffee"].read_bytes())  # outside any class folder
    scan = scan_dataset(root)
    why = {Path(p).name: reason for p, reason in scan.skipped}
    for name, reason in BAD.items():
        if name != "trunc.jpg":  # its header is fine: the data path reports it when it fails to decode
            assert reason in why[name], (name, why.get(name))
    assert "not inside a class folder" in why["stray.jpg"] and why["notes.txt"] == "not an image file (.txt)"
    assert sorted(p.name for p in scan.train["cat"]) == sorted([*GOOD, "trunc.jpg"])


def test_nested_sets_of_class_folders_are_refused(tmp_path, photos):
    """Sets of class folders raise DatasetError "nested layout …"; class folders with unrelated subfolders scan
    normally.
    """
    root = tmp_path / "DATA"
    for s in ("setA", "setB"):
        for c in ("cat", "dog"):
            (root / s / c).mkdir(parents=True)
            (root / s / c / "1.jpg").write_bytes(photos["coffee"].read_bytes())
    with pytest.raises(DatasetError, match=r"nested layout: its folder\(s\) setA, setB each hold class folders "
                                           r"\(cat, dog\).*point at one set"):
        scan_dataset(root)
    # class folders with their own, unrelated subfolders are an ordinary dataset
    ok = tmp_path / "ok"
    for c, subs in (("cat", ("kittens", "old")), ("dog", ("puppies", "young"))):
        for sub in subs:
            (ok / c / sub).mkdir(parents=True)
            (ok / c / sub / "1.jpg").write_bytes(photos["coffee"].read_bytes())
    assert scan_dataset(ok).counts == {"cat": 2, "dog": 2}


def test_pil_data_path_reports_files_that_fail_in_validation(tmp_path):
    """A truncated PNG passes the header scan and fails when decoded: both data paths list every one of them.

    Truncated PNGs that pass the header scan are listed in `result.skipped` on both cached and PIL data paths.
    [fine-tune]
    """
    from tests.conftest import TINY_SPEC
    from tests.core.generators import run
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    data = make_dataset(tmp_path / "colours", per_class=10)
    broken = set()
    for c in ("red", "green", "blue"):
        good = next((data / c).glob("*.png")).read_bytes()
        for k in range(3):
            (data / c / f"trunc{k}.png").write_bytes(good[: len(good) // 2])
            broken.add(str(data / c / f"trunc{k}.png"))
    for data_path in ("cached", "pil"):
        cfg = make_config(str(data), TINY_SPEC.replace("classes=5", "classes=3"), str(tmp_path / data_path),
                          preset="scratch", epochs=1, batch_size=4, data_path=data_path)
        result, _ = run(fine_tune(cfg))
        assert set(result.skipped) == broken, data_path
