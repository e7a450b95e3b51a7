"""Output folders built beside and swapped in whole (core/outputs.py): a `segment --out` or `teach --export` killed
over an earlier output leaves that output byte for byte, a run finding the folder's lock held is refused in one line,
and a model folder whose config.json and weights come from two saves is refused when loaded. Each kill is a real
process (the warm `forked_cli`) SIGKILLed at a fault point after the output started being written. The hostile table
(tests/benchmarks/hostile_table.py) kills at timed instants and races two runs, many times."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset
from vitstudio.cli import main
from vitstudio.core.outputs import MANIFEST


def segment_data(root: Path, n: int = 12) -> tuple[Path, Path, Path]:
    """(a folder of n images with unique stems, painted masks A, painted masks B painting the opposite classes)."""
    rng = np.random.default_rng(0)
    images, a, b = root / "images", root / "painted-a", root / "painted-b"
    for folder in (images, a, b):
        folder.mkdir(parents=True)
    for i in range(n):
        img = Image.fromarray(rng.integers(0, 60, (32, 32, 3)).astype(np.uint8))
        ImageDraw.Draw(img).rectangle([4 + i % 8, 6, 20 + i % 8, 24], fill=(230, 200, 40))
        img.save(images / f"img{i:02d}.png")
    for i in range(2):
        mask = np.zeros((32, 32), np.uint8)
        mask[6:25, 4 + i:21 + i] = 1
        Image.fromarray(mask).save(a / f"img{i:02d}.png")
        Image.fromarray((1 - mask).astype(np.uint8)).save(b / f"img{i:02d}.png")
    return images, a, b


def snapshot(folder: Path, manifest: bool = True) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes); without the manifest, which names its run."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and (manifest or p.name != MANIFEST)}


def test_a_segmentation_killed_over_an_earlier_output_leaves_that_output_whole(forked_cli, tiny_weights, tmp_path):
    """`segment --out OUT --csv --coco` over an earlier output, SIGKILLed after its sixth mask was written and again
    just before its swap: OUT is byte for byte the earlier output both times (no mask of the killed run beside the
    earlier areas.csv); run again, OUT is the new run's output whole and nothing of the killed runs is left beside it.
    """
    images, a, b = segment_data(tmp_path)
    base = ["segment", str(images), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--csv", "--coco",
            "--quiet"]
    out, reference = tmp_path / "out", tmp_path / "reference"
    assert main([*base, "--masks", str(a), "--out", str(out)]) == 0
    assert main([*base, "--masks", str(b), "--out", str(reference)]) == 0
    earlier, new = snapshot(out), snapshot(reference, manifest=False)
    differ = [name for name in new if name.endswith(".png") and snapshot(out)[name] != new[name]]
    assert len(differ) >= 10 and MANIFEST in earlier  # the two runs' masks tell them apart
    for point in ("before-rename-img06.png", "output-swap"):
        killed = forked_cli.run([*base, "--masks", str(b), "--out", str(out)],
                                env=dict(os.environ, VITSTUDIO_DIE_AT=point))
        assert killed.returncode == -9, (point, killed.stderr[-2000:])
        assert snapshot(out) == earlier, point
    assert main([*base, "--masks", str(b), "--out", str(out)]) == 0
    assert snapshot(out, manifest=False) == new
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out")) == []


def test_an_export_killed_over_another_projects_export_leaves_that_export_whole(forked_cli, tiny_weights,
                                                                                  tmp_path, monkeypatch):
    """`teach Q --export DIR` over an export of project P, SIGKILLed between the weights' and the config's renames of
    its run/ folder: DIR is P's export byte for byte (its run/ and check.json: never run/ of one project beside
    the other's files under the old check.json).
    """
    from vitstudio.cli.common import drain
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.teach import export
    from vitstudio.core.teach.project import open_project
    from vitstudio.core.teach.session import teach

    p = make_dataset(tmp_path / "p", per_class=3, classes={"ants": (200, 40, 40), "bees": (40, 200, 40)})
    q = make_dataset(tmp_path / "q", per_class=3, seed=1, classes={"cats": (40, 40, 200), "dogs": (200, 200, 40)})
    out = tmp_path / "export"
    loaded = load_model(TINY_SPEC, str(tiny_weights[0]), "cpu")
    _, result = drain(teach(loaded, open_project(p), "quick"), quiet=True)
    # ONNX, seed and the out-of-distribution bank (scikit-learn's import) cost seconds and add nothing here
    monkeypatch.setattr(export, "_write_banks", lambda *args: ((), "not written in this test"))
    export.export_taught(loaded, result, out, formats=("timm",), project=p)
    earlier = snapshot(out)
    assert {"run/model.safetensors", "run/config.json", "check.json", MANIFEST} <= set(earlier)
    model = ["--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--quiet"]
    killed = forked_cli.run(["teach", str(q), "--export", str(out), *model],
                            env=dict(os.environ, VITSTUDIO_DIE_AT="before-rename-config.json"))
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert snapshot(out) == earlier


def test_a_run_into_a_folder_another_run_is_writing_is_refused_in_one_line(tiny_weights, tmp_path, capsys):
    """While another process holds OUT's lock (a run writing it now), `segment --out OUT` is refused in one line
    (exit 2) and OUT is untouched; once the lock is let go, the same command runs and replaces it.
    """
    import fcntl

    images, a, _ = segment_data(tmp_path, n=3)
    argv = ["segment", str(images), "--masks", str(a), "--out", str(tmp_path / "out"), "--model", TINY_SPEC,
            "--weights", str(tiny_weights[0]), "--quiet"]
    assert main(argv) == 0
    earlier = snapshot(tmp_path / "out")
    capsys.readouterr()
    with open(tmp_path / ".out.lock", "w") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and "being written by another run" in lines[0], lines
        assert snapshot(tmp_path / "out") == earlier
    assert main(argv) == 0 and snapshot(tmp_path / "out") != earlier  # a new run id in the manifest


def test_a_model_folder_left_with_one_saves_weights_and_anothers_config_is_refused(tmp_path, monkeypatch):
    """`save_model_folder` stopped between its two renames (a full disk at the config's rename: the second save's
    weights are in, the first save's config stays) leaves a folder the loader refuses in one line naming both
    files; a folder saved whole loads, as does a plain timm folder (no tokens)."""
    from tests.conftest import make_tiny_vit
    from vitstudio.core import files
    from vitstudio.core.models.loading import ModelLoadError, load_model
    from vitstudio.core.train.runs import save_model_folder

    first, second = make_tiny_vit(seed=0), make_tiny_vit(seed=1)
    config = {"input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3, "crop_pct": 1.0,
              "interpolation": "bilinear"}
    save_model_folder(first, tmp_path / "m", list("abcde"), config)
    assert load_model(str(tmp_path / "m"), device="cpu").labels == list("abcde")
    monkeypatch.setattr(files, "_passes", {})
    monkeypatch.setenv("VITSTUDIO_FULL_AT", "before-rename-config.json")
    with pytest.raises(OSError):
        save_model_folder(second, tmp_path / "m", list("abcde"), config)
    monkeypatch.delenv("VITSTUDIO_FULL_AT")
    with pytest.raises(ModelLoadError, match="config.json and model.safetensors in .* are not one pair"):
        load_model(str(tmp_path / "m"), device="cpu")
    from timm.models import save_for_hf

    save_for_hf(second, str(tmp_path / "plain"), model_config={"label_names": list("abcde")}, data_config=config,
                safe_serialization=True)
    assert load_model(str(tmp_path / "plain"), device="cpu").labels == list("abcde")


def test_an_output_named_through_a_symbolic_link_replaces_the_folder_it_names(tiny_weights, tmp_path):
    """`segment --out LINK` where LINK names an earlier output folder: that folder is replaced and LINK stays a link
    to it (the swap happens beside the folder, not beside the link); a link to no folder is refused in one line."""
    images, a, _ = segment_data(tmp_path, n=3)
    argv = ["segment", str(images), "--masks", str(a), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]),
            "--quiet", "--out"]
    assert main([*argv, str(tmp_path / "real")]) == 0
    run = (tmp_path / "real" / MANIFEST).read_bytes()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert main([*argv, str(tmp_path / "link")]) == 0
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / MANIFEST).read_bytes() != run
    assert sorted(p.name for p in (tmp_path / "real").glob("*.png")) == ["img00.png", "img01.png", "img02.png"]
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert main([*argv, str(tmp_path / "dangling")]) == 2 and not (tmp_path / "nowhere").exists()
