"""A full disk during `vitstudio finetune` ends in one line naming the file, what happened and how to go on (exit 1),
never a traceback; the run left behind says it did not finish wherever it is loaded; freed, it resumes to the end
(issue 29, item 17: a traceback in 4 of 6 fill levels, then `predict` loaded the failed run without a word).

The disk fills at six points of a run (VITSTUDIO_FULL_AT raises the OSError a write gets from a full disk: errno 28
and no file name), in a process of its own each (forked warm, as the kill tests)."""

from __future__ import annotations

import json

import pytest

from tests.core.test_run_survival import EPOCHS, _epochs_logged, _leftovers, _start_args, cli, data  # noqa: F401

FILL_POINTS = [  # (where the disk fills, the file named, whether the run holds weights by then)
    ("before-rename-split.json", "split.json", False),  # preparing the run folder
    ("before-rename-model.safetensors", "model.safetensors", False),  # the first best model
    ("before-rename-checkpoint-last.pt", "checkpoint-last.pt", True),  # the first checkpoint
    ("before-rename-checkpoint-last.pt:3", "checkpoint-last.pt", True),  # a later one
    ("before-rename-eval.json", "eval.json", True),  # the final evaluation
    ("before-rename-status.json:2", "status.json", True),  # the final status: every epoch done
]


@pytest.mark.parametrize("point, file, has_weights", FILL_POINTS)
def test_a_full_disk_is_one_line_and_the_run_says_it_did_not_finish(data, tmp_path, cli, point, file,  # noqa: F811
                                                                     has_weights):
    """Exit 1 and exactly one stderr line naming the file, "No space left on device" and the `--resume` command; a run
    holding weights says "did not finish" when `predict` loads it; resumed, it finishes with every epoch once and no
    temp files. [subprocess: forked warm] [fine-tune] [parametrised ×6: fill points]
    """
    out = tmp_path / "run"
    res = cli(_start_args(data, out), full_at=point)
    assert res.returncode == 1, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert lines[0].startswith(f"error: could not write {out / file}: No space left on device."), lines[0]
    assert f"vitstudio finetune --out {out} --resume" in lines[0]
    if has_weights:
        predicted = cli(["predict", str(next(data.rglob("*.png"))), "--model", str(out)])
        assert predicted.returncode == 0, predicted.stderr[-2000:]
        assert f"note: The run {out.name} " in predicted.stderr and "best epoch so far" in predicted.stderr
    again = cli(["finetune", "--out", str(out), "--resume", "--quiet"] if (out / "train_config.json").exists()
                else _start_args(data, out))  # space freed: the same run goes on to the end
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((out / "status.json").read_text())["status"] == "finished"
    assert _epochs_logged(out) == list(range(EPOCHS)) and not _leftovers(out)


def test_safetensors_reporting_a_full_disk_names_the_file(tmp_path, monkeypatch):
    """safetensors' own writer says "I/O error: No space left on device (os error 28)" (measured on a full tmpfs;
    older releases "IoError(Os { code: 28, … })"): an OSError with errno 28 naming the weights file."""
    import errno

    import safetensors.torch
    from safetensors import SafetensorError

    from vitstudio.core.models.loading import load_model
    from vitstudio.core.train.runs import save_model_folder

    def full(*_args, **_kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    loaded = load_model("custom:img=32,patch=8,width=32,depth=1,heads=2,classes=2", device="cpu")
    with pytest.raises(OSError) as caught:
        save_model_folder(loaded.model, tmp_path / "m", ["a", "b"], loaded.data_config)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(tmp_path / "m" / "model.safetensors")
    assert not [p for p in (tmp_path / "m").iterdir()]  # the staging folder is gone


@pytest.mark.parametrize("point, file", [
    ("cache-append", "/layer-0/tokens-0.f16"),  # the token cache (the layers and embedding caches share its store)
    ("before-rename-c.safetensors.partial", "c.safetensors.partial"),  # the SAE's checkpoint
    ("before-rename-c.safetensors", "c.safetensors"),
    ("before-rename-c.json", "c.json"),  # the sidecar, the weights already renamed
])
def test_a_full_disk_during_concepts_is_one_line_and_the_same_command_goes_on(tiny_weights, tmp_path, monkeypatch,
                                                                              capsys, point, file):
    """`vitstudio concepts` on a disk that fills at each of its writes: exit 1, one line naming the file and saying
    that the same command goes on (a 27-line traceback before, or, for the cache, an OSError naming no file); the
    same command then ends with a pair that loads.

    `concepts` in-process with the disk filling (VITSTUDIO_FULL_AT) at the token cache's append, the checkpoint, the
    weights and the sidecar: exit 1, one line "could not write FILE: No space left on device. Free some space … run the
    same command again" (the CLI's one handler for a full disk); the same command then ends with a pair that loads and
    no checkpoint. [parametrised ×4]
    """
    from PIL import Image

    from tests.conftest import TINY_SPEC
    from vitstudio.cli import main
    from vitstudio.core import files
    from vitstudio.core.concepts.concepts_file import load_concepts

    for i in range(3):
        (tmp_path / "images").mkdir(exist_ok=True)
        Image.new("RGB", (32, 32), (80 * i, 40, 200)).save(tmp_path / "images" / f"{i}.png")
    args = ["concepts", str(tmp_path / "images"), "--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--size",
            "4", "--k", "2", "--epochs", "1", "--out", str(tmp_path / "c"), "--quiet"]
    monkeypatch.setattr(files, "_passes", {})
    monkeypatch.setenv("VITSTUDIO_FULL_AT", point)
    assert main(args) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: could not write ") and file in lines[0], lines
    assert "No space left on device. Free some space on that disk and run the same command again" in lines[0]
    monkeypatch.delenv("VITSTUDIO_FULL_AT")
    assert main(args) == 0, capsys.readouterr().err
    assert load_concepts(tmp_path / "c").size == 4 and not (tmp_path / "c.safetensors.partial").exists()


def test_peft_reporting_a_full_disk_names_the_adapter_file(tmp_path):
    """peft's save_pretrained writes through safetensors, whose full disk is a SafetensorError quoting "os error 28"
    (a traceback from adapters.py before): an OSError with errno 28 naming RUN/adapter/adapter_model.safetensors,
    which `finetune` says in its one line; no staging folder is left and the old adapter stays."""
    import errno

    from safetensors import SafetensorError

    from vitstudio.core.train.adapters import save_adapter_folder

    class Full:
        def save_pretrained(self, _folder):
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_model.safetensors").write_bytes(b"old")
    with pytest.raises(OSError) as caught:
        save_adapter_folder(Full(), tmp_path, {"classes": ["a"]})
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(tmp_path / "adapter" / "adapter_model.safetensors")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter"]
    assert (tmp_path / "adapter" / "adapter_model.safetensors").read_bytes() == b"old"
