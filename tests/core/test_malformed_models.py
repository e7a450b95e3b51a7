"""Malformed model folders and weights files on the command line (issue 29, item 18): each is one line naming the
file and the fault, exit code 2, never a traceback, torch's state-dict dump or its advice to load a pickle anyway."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from tests.conftest import TINY_SPEC, make_tiny_vit


def _folder(root: Path) -> tuple[Path, dict]:
    from timm.models import save_for_hf

    folder = root / "model"
    save_for_hf(make_tiny_vit(), str(folder), safe_serialization=True)
    return folder, json.loads((folder / "config.json").read_text())


def _nested(folder: Path, config: dict) -> None:
    (folder / "config.json").write_text('{"architecture": "vit_base_patch16_224", "x": ' + "[" * 100_000
                                        + "]" * 100_000 + "}")


def _without_pretrained_cfg(folder: Path, config: dict) -> None:
    config.pop("pretrained_cfg")
    (folder / "config.json").write_text(json.dumps(config))


def _weights_to_dev_zero(folder: Path, config: dict) -> None:
    (folder / "model.safetensors").unlink()
    os.symlink("/dev/zero", folder / "model.safetensors")


def _config_to_dev_zero(folder: Path, config: dict) -> None:
    (folder / "config.json").unlink()
    os.symlink("/dev/zero", folder / "config.json")


def _wider_config(folder: Path, config: dict) -> None:
    config["model_args"]["embed_dim"] = 64
    (folder / "config.json").write_text(json.dumps(config))


class _RunsCode:
    def __init__(self, witness: Path) -> None:
        self.witness = witness

    def __reduce__(self):  # unpickling it would create the witness file
        return (os.system, (f"touch '{self.witness}'",))


def _pickled_code(folder: Path, config: dict) -> None:
    (folder / "model.safetensors").unlink()
    torch.save({"head.weight": _RunsCode(folder.parent / "ran")}, folder / "pytorch_model.bin")


@pytest.mark.skipif(sys.platform == "win32", reason="links to /dev/zero")
@pytest.mark.parametrize("spoil, says", [
    (_nested, "config.json is nested too deeply to be a model config"),
    (_without_pretrained_cfg, "has no 'pretrained_cfg' object, so timm reads the whole file as one, where "
                              "'global_pool', 'model_args'"),
    (_weights_to_dev_zero, "model.safetensors is not a regular file (a character device, through a symbolic link to "
                           "/dev/zero)"),
    (_config_to_dev_zero, "config.json is not a regular file (a character device"),
    (_wider_config, "31 tensors differ in shape (e.g. cls_token is [1, 1, 32] in the file, [1, 1, 64] in the model"),
    (_pickled_code, "contains pickled Python objects besides tensors"),
], ids=lambda v: getattr(v, "__name__", "")[1:] if callable(v) else "")
def test_a_malformed_model_folder_is_one_line(tmp_path, forked_cli, spoil, says):
    """`predict --model FOLDER` with a config nested 100,000 deep, without `pretrained_cfg`, weights or config linked to
    /dev/zero (refused, never read), a config wider than its weights (31 mismatched tensors counted, one example), a
    pickle that would run code (it does not): exactly one stderr line with the expected words. [subprocess: forked warm]
    [parametrised ×6: faults]
    """
    folder, config = _folder(tmp_path)
    spoil(folder, config)
    image = tmp_path / "a.png"
    Image.new("RGB", (40, 40), "red").save(image)
    result = forked_cli.run(["predict", "--model", str(folder), str(image)])
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert says in result.stderr
    assert "weights_only" not in result.stderr and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("content, says", [
    (b"root:*:19000:0:99999:7:::\n" * 4, "is not a weights file: it is text, not a safetensors file or a PyTorch"),
    (b"\x00\x01\x02\x03" * 8, "neither a zip archive nor a pickle"),
    (b"PK", "it is 2 bytes long"),
])
def test_weights_that_are_not_a_checkpoint_are_named_from_their_first_bytes(tmp_path, forked_cli, content, says):
    """`--weights` on a text file (/etc/shadow-like), binary junk and a 2-byte file: "is not a weights file" with what
    it is, no IndexError. [subprocess: forked warm] [parametrised ×3]
    """
    weights = tmp_path / "shadow"
    weights.write_bytes(content)
    image = tmp_path / "a.png"
    Image.new("RGB", (40, 40), "red").save(image)
    result = forked_cli.run(["predict", "--model", TINY_SPEC, "--weights", str(weights), str(image)])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result
    assert says in result.stderr and "IndexError" not in result.stderr


def test_a_labels_file_with_a_giant_cell_is_one_line_for_every_command(tmp_path, forked_cli):
    """A labels CSV with a 200,000-character cell: `finetune`, `audit`, `suggest` and `eval --labels` each print the
    same one error line naming the file and line 3; no run folder is made. [subprocess: forked warm]
    """
    Image.new("RGB", (40, 40), "red").save(tmp_path / "a.png")
    labels = tmp_path / "labels.csv"
    labels.write_text("path,label\na.png,ok\na.png," + "x" * 200_000 + "\n")
    for args in (["finetune", "--labels", str(labels), "--out", str(tmp_path / "run"), "--model", TINY_SPEC],
                 ["audit", "--labels", str(labels), "--model", TINY_SPEC],
                 ["suggest", "--labels", str(labels), "--model", TINY_SPEC, str(tmp_path)],
                 ["eval", "--labels", str(labels), "--model", TINY_SPEC]):
        result = forked_cli.run(args)
        assert result.returncode != 0 and "Traceback" not in result.stderr, (args, result)
        error = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert error == [f"error: {labels}, line 3: field larger than field limit (131072); a labels file holds "
                         f"'path,label' rows."], (args, result.stderr)
    assert not (tmp_path / "run").exists()


def test_a_head_of_a_billion_classes_is_refused_before_anything_is_built(tmp_path):
    """num_classes at the top of config.json (where timm reads the head's size from too), not in model_args.

    `num_classes` 10⁹ at the top of config.json (timm sizes the head from it too) is refused by the config check, not by
    the allocator (issue 29, item 19).
    """
    from vitstudio.core.models.loading import ModelLoadError, load_model

    folder, config = _folder(tmp_path)
    config["num_classes"] = 1_000_000_000
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="'num_classes'=1000000000 is outside the valid range 0..1000000"):
        load_model(str(folder))


def test_label_names_that_cannot_name_the_outputs_are_said_on_load(tmp_path, capsys):
    """A config naming 1 class for 5 outputs: the card's Note row says the names were not used (item 19)."""
    from vitstudio.cli import main

    folder, config = _folder(tmp_path)
    config["pretrained_cfg"]["label_names"] = ["cat"]
    (folder / "config.json").write_text(json.dumps(config))
    assert main(["card", "--model", str(folder)]) == 0
    said = "The model config's label_names lists 1 name for 5 outputs; they were not used."
    assert f"Note                    {said}" in capsys.readouterr().out


@pytest.mark.skipif(sys.platform != "linux", reason="an address-space limit (RLIMIT_AS)")
def test_pytorch_that_cannot_load_under_a_memory_limit_is_one_line(tmp_path):
    """`predict` under a 300 MB address-space limit: exit 1 and one line "PyTorch could not be loaded: … memory …", no
    traceback (item 19). [subprocess] [Linux only]
    """
    import resource
    import subprocess

    image = tmp_path / "a.png"
    Image.new("RGB", (40, 40), "red").save(image)
    limit = 300 << 20  # enough for Python and the CLI's parser, not for torch's libraries
    result = subprocess.run([sys.executable, "-m", "vitstudio", "predict", "--model", TINY_SPEC, str(image)],
                            capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2],
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: PyTorch could not be loaded: "), result
    assert "memory" in result.stderr
