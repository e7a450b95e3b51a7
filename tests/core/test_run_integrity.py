"""Issue 18: a run is resumed by its own path; what the CLI advises works; "finished" is written last; a second
Ctrl+C still ends in one line; damaged run files are named, never a traceback; the seed export's constructor
loads its file in upstream's ViT; relative seed paths keep their labels."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch

from tests.conftest import TINY_SPEC
from tests.core.generators import run as run_job
from tests.core.synthetic_data import make_dataset

SPEC3 = TINY_SPEC.replace("classes=5", "classes=3")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("data") / "colours", per_class=8)


def _config(data, out, epochs=3):
    from vitstudio.core.train.recipes import make_config

    return make_config(str(data), SPEC3, str(out), "scratch", epochs=epochs, batch_size=8)


@pytest.fixture(scope="module")
def cancelled_run(data, tmp_path_factory):
    """A run cancelled after its first epoch (3 planned): it has a checkpoint and resumes."""
    from vitstudio.core.jobs import CancelToken
    from vitstudio.core.train.engine import EpochMetrics, fine_tune

    out = tmp_path_factory.mktemp("runs") / "first"
    cancel = CancelToken()
    result, _ = run_job(fine_tune(_config(data, out), cancel),
                        lambda rec: cancel.cancel() if isinstance(rec, EpochMetrics) else None)
    assert result.status == "cancelled" and result.epochs_done == 1
    return out


def _copy(run, tmp_path, name="copy"):
    target = tmp_path / name
    shutil.copytree(run, target, ignore=shutil.ignore_patterns(".lock"))
    return target


def _rows(out):
    from vitstudio.core.train.runs import read_metrics

    return [int(r["epoch"]) for r in read_metrics(out)]


# 1 ------------------------------------------------------------------------------------------------------------
def test_resume_trains_the_folder_given_not_the_one_recorded(cancelled_run, tmp_path):
    """`--resume` on a copied run trains the copy to the end (rows 0-2, eval.json), records its path, and leaves the
    original untouched. [fine-tune]
    """
    from vitstudio.cli import main

    before = {p.name: p.stat().st_mtime_ns for p in cancelled_run.iterdir() if p.is_file()}
    renamed = _copy(cancelled_run, tmp_path, "renamed")
    assert main(["finetune", "--out", str(renamed), "--resume", "--quiet"]) == 0
    assert json.loads((renamed / "status.json").read_text())["status"] == "finished"
    assert _rows(renamed) == [0, 1, 2]
    assert (renamed / "eval.json").is_file()
    # the original run is untouched
    assert {p.name: p.stat().st_mtime_ns for p in cancelled_run.iterdir() if p.is_file()} == before
    assert json.loads((cancelled_run / "status.json").read_text())["status"] == "cancelled"
    # and the recorded settings now name the folder that was trained
    assert json.loads((renamed / "train_config.json").read_text())["out_dir"] == str(renamed)


# 2 ------------------------------------------------------------------------------------------------------------
def test_before_the_settings_are_recorded_no_resume_is_offered(data, tmp_path, capsys):
    """A kill before train_config.json exists leaves the folder with only its lock: `--resume` alone cannot know
    the settings, so neither the Ctrl+C advice nor the error offers it; with the settings given it starts over.

    [fine-tune]
    """
    from vitstudio.cli import main
    from vitstudio.cli.train import _how_to_continue

    out = tmp_path / "run"
    out.mkdir()
    (out / ".lock").write_text("pid 1")  # what a kill during the dataset scan or the model load leaves
    advice = _how_to_continue(out)
    assert "--resume" not in advice and "same command" in advice, advice
    assert main(["finetune", "--out", str(out), "--resume", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "train_config.json" in err and "vitstudio finetune DATA_DIR --model" in err, err
    args = ["finetune", str(data), "--model", SPEC3, "--out", str(out), "--preset", "scratch", "--epochs", "1",
            "--batch-size", "8", "--quiet"]
    assert main([*args, "--resume"]) == 0  # the CLI has every setting: it starts the run over
    assert json.loads((out / "status.json").read_text())["status"] == "finished"


# 3 ------------------------------------------------------------------------------------------------------------
def test_finished_is_written_only_after_the_final_evaluation(data, tmp_path, monkeypatch):
    """Status is "running" during the final evaluation and "finished" after, with eval.json. [fine-tune]"""
    from vitstudio.core.train import engine

    out = tmp_path / "run"
    seen = []
    real = engine.evaluate

    def watching(*args, **kwargs):
        seen.append(json.loads((out / "status.json").read_text())["status"])
        return (yield from real(*args, **kwargs))

    monkeypatch.setattr(engine, "evaluate", watching)
    result, _ = run_job(engine.fine_tune(_config(data, out, epochs=1)))
    assert seen == ["running"]  # during the final evaluation the run is not finished yet
    assert result.status == "finished" and (out / "eval.json").is_file()
    assert json.loads((out / "status.json").read_text())["status"] == "finished"


# 4 ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("second", ["before-rename-status.json:2", "release-lock", "cli-interrupted"])
def test_a_second_ctrl_c_during_cleanup_still_ends_in_one_line(data, tmp_path, second, forked_cli):
    """A second SIGINT during status write / lock release / CLI handler: exit 130, one "Interrupted; continue with …
    --resume" line, status interrupted, whole checkpoint, no temp files. [subprocess: forked warm] [parametrised ×3]
    """
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("VITSTUDIO_DIE_AT", "VITSTUDIO_INTERRUPT_AT")}
    env["VITSTUDIO_INTERRUPT_AT"] = f"train-step:5,{second}"  # the first Ctrl+C mid-epoch 3, the second later
    args = ["finetune", str(data), "--model", SPEC3, "--out", str(out), "--preset", "scratch", "--epochs", "40",
            "--batch-size", "8", "--quiet"]
    proc = forked_cli.run(args, env)  # a process of its own with Python's usual Ctrl+C handling, as in a terminal
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0] == f"Interrupted; continue with: vitstudio finetune --out {out} --resume"
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "interrupted" and status["epochs_done"] >= 1
    state = torch.load(out / "checkpoint-last.pt", weights_only=True)  # whole, never half-written
    assert state["epoch"] == status["epochs_done"] - 1
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") or p.name.startswith(".staging-")]


# 5 ------------------------------------------------------------------------------------------------------------
def _write(name, content):
    def damage(run):
        path = run / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return damage


def _set_config(**changes):
    def damage(run):
        config = json.loads((run / "train_config.json").read_text())
        config.update(changes)
        (run / "train_config.json").write_text(json.dumps(config))
    return damage


def _truncate(name, keep=0.5):
    def damage(run):
        blob = (run / name).read_bytes()
        (run / name).write_bytes(blob[: int(len(blob) * keep)])
    return damage


def _checkpoint(**changes):
    def damage(run):
        state = torch.load(run / "checkpoint-last.pt", weights_only=True)
        for key, value in changes.items():
            if value is None:
                del state[key]
            else:
                state[key] = value
        torch.save(state, run / "checkpoint-last.pt")
    return damage


def _lock_dir(run):
    (run / ".lock").unlink(missing_ok=True)
    (run / ".lock").mkdir()
    (run / ".lock" / "x").write_text("")


DAMAGES = {
    "checkpoint truncated": ("checkpoint-last.pt", _truncate("checkpoint-last.pt")),
    "checkpoint garbage": ("checkpoint-last.pt", _write("checkpoint-last.pt", b"not a checkpoint at all")),
    "checkpoint empty": ("checkpoint-last.pt", _write("checkpoint-last.pt", b"")),
    "checkpoint without epoch": ("checkpoint-last.pt", _checkpoint(epoch=None)),
    "checkpoint wrong weights": ("checkpoint-last.pt", _checkpoint(model={"head.weight": torch.zeros(2, 2)})),
    "config epochs a string": ("train_config.json", _set_config(epochs="3")),
    "config a list": ("train_config.json", _write("train_config.json", "[1, 2, 3]")),
    "config truncated": ("train_config.json", _truncate("train_config.json")),
    "config unknown key": ("train_config.json", _set_config(epochz=3)),
    "config lr a list": ("train_config.json", _set_config(lr=[1, 2])),
    "lock a directory": (".lock", _lock_dir),
    "split truncated": ("split.json", _truncate("split.json")),
    "metrics garbage": ("metrics.csv", _write("metrics.csv", "epoch,train_loss\nzero,one\n")),
    "status a list": ("status.json", _write("status.json", "[]")),
}


@pytest.mark.parametrize("case", list(DAMAGES))
def test_damaged_run_files_are_named_on_resume(cancelled_run, tmp_path, capsys, case):
    """Each of 14 damaged run files (checkpoint, train_config, lock, split, metrics, status) gives exit 2 with one
    "error:" line naming the file. [parametrised ×14]
    """
    from vitstudio.cli import main

    name, damage = DAMAGES[case]
    run = _copy(cancelled_run, tmp_path)
    damage(run)
    capsys.readouterr()
    code = main(["finetune", "--out", str(run), "--resume", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert str(run / name) in err, err



class _Payload:  # a pickled object that would run code on load with weights_only=False
    def __reduce__(self):
        return (print, ("pwned",))


def test_a_hostile_checkpoint_is_refused_before_any_work(data, tmp_path, capsys, monkeypatch):
    """A run folder whose checkpoint-last.pt holds pickled objects: `finetune --resume` refuses it in one line
    before the dataset is scanned or the model loaded (issue 49 item 17: it scanned, loaded and decoded first).

    A hand-made run folder whose checkpoint-last.pt holds a pickled object: `finetune --resume` exits 2 with one line
    naming it, and the dataset scan, model load and loaders are never called (spies; issue 49 item 17), nothing printed
    by the payload.
    """
    from vitstudio.cli import main
    from vitstudio.core.train import engine
    from vitstudio.core.train.runs import CHECKPOINT

    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text(_config(data, run).to_json())
    torch.save({"model": {}, "evil": _Payload()}, run / CHECKPOINT)
    started = []
    for work in ("prepare_split", "load_model", "make_loaders"):
        monkeypatch.setattr(engine, work, lambda *a, _work=work, **k: started.append(_work) or 1 / 0)
    assert main(["finetune", "--out", str(run), "--resume", "--quiet"]) == 2
    err = capsys.readouterr()
    assert started == [] and "pwned" not in err.out
    assert err.err.startswith(f"error: {run / CHECKPOINT} contains pickled Python objects") and \
        len(err.err.strip().splitlines()) == 1, err.err

# 6 ------------------------------------------------------------------------------------------------------------
SEED_SHAPES = {
    "mlp ratio 2": dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0),
    "no qkv bias": dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, qkv_bias=False),
    "representation layer": dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, rep=24),
}


def _loaded(kwargs):
    import timm

    from vitstudio.core.models.checkpoints import attach_representation_head
    from vitstudio.core.models.loading import loaded_module

    kwargs = dict(kwargs)
    rep = kwargs.pop("rep", None)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=3, **kwargs).eval()
    if rep:
        attach_representation_head(model, rep)
    return loaded_module(model, "test", source="test")


@pytest.mark.parametrize("case", list(SEED_SHAPES))
def test_seed_export_constructor_loads_the_exported_file(tmp_path, case):
    """The printed upstream constructor, exec'd with the upstream vit_model.py port, loads model.pth strictly with equal
    logits (MLP 2×, no qkv bias, representation layer); reference: upstream vit_model.py. [parametrised ×3]
    """
    from tests.core.seed_reference import SeedVisionTransformer
    from vitstudio.core.models.seed_export import export_seed

    loaded = _loaded(SEED_SHAPES[case])
    result = export_seed(loaded, tmp_path / "upstream")
    namespace = {"VisionTransformer": SeedVisionTransformer}
    exec(f"model = {result.constructor}", namespace)  # as upstream's predict.py would build it
    state = torch.load(tmp_path / "upstream" / "model.pth", weights_only=True)
    namespace["model"].load_state_dict(state, strict=True)
    x = torch.randn(2, 3, *loaded.input_hw)
    with torch.no_grad():
        torch.testing.assert_close(namespace["model"].eval()(x), loaded.model(x), atol=1e-5, rtol=0)


def test_seed_export_refuses_a_non_square_input_by_name(tmp_path):
    """A 64×96 model is refused ("square") and nothing is written."""
    from vitstudio.core.models.seed_export import export_seed

    loaded = _loaded(dict(img_size=(64, 96), patch_size=16, embed_dim=32, depth=1, num_heads=2))
    with pytest.raises(ValueError, match="64×96.*square"):
        export_seed(loaded, tmp_path / "upstream")
    assert not (tmp_path / "upstream" / "model.pth").exists()


def test_a_seed_export_loads_back_with_its_own_preprocessing_and_a_bad_record_is_one_line(tmp_path):
    """The walk: a run trained at crop 1.0, exported in upstream's format and loaded back, came back at the seed's
    crop 0.875 and changed its answers. The export records the model's preprocessing beside model.pth (upstream
    ignores the file); a folder without the record is read as upstream's; a broken record is one line."""
    import json

    from vitstudio.core.models.checkpoints import SEED_CROP_PCT, SEED_SHAPE_FILE
    from vitstudio.core.models.loading import ModelLoadError, load_model
    from vitstudio.core.models.seed_export import export_seed

    loaded = _loaded(dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2))
    loaded.data_config.update(crop_pct=1.0, mean=(0.1, 0.2, 0.3), std=(0.9, 0.8, 0.7))
    export_seed(loaded, tmp_path / "upstream")
    back = load_model(str(tmp_path / "upstream"))
    for key in ("crop_pct", "mean", "std", "interpolation"):
        assert tuple(np.ravel(back.data_config[key])) == tuple(np.ravel(loaded.data_config[key])), key
    record = tmp_path / "upstream" / SEED_SHAPE_FILE
    record.write_text(json.dumps({"num_heads": 2}))  # an export from before the record: upstream's transform
    assert load_model(str(tmp_path / "upstream")).data_config["crop_pct"] == pytest.approx(SEED_CROP_PCT)
    record.write_text(json.dumps({"num_heads": 2, "preprocessing": {"crop_pct": 7}}))
    with pytest.raises(ModelLoadError, match="preprocessing cannot be read: crop_pct 7 is not in") as caught:
        load_model(str(tmp_path / "upstream"))
    assert "\n" not in str(caught.value)


# 7 ------------------------------------------------------------------------------------------------------------
def test_relative_seed_path_inside_weights_keeps_the_labels(tmp_path, monkeypatch):
    """A relative `model-0.pth` or `weights/model-0.pth` path still finds class_indices.json."""
    from tests.core.seed_reference import SeedVisionTransformer
    from vitstudio.core.models.loading import load_model

    root = tmp_path / "vision_transformer"
    (root / "weights").mkdir(parents=True)
    names = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
    (root / "class_indices.json").write_text(json.dumps({str(i): n for i, n in enumerate(names)}))
    ref = SeedVisionTransformer(img_size=32, patch_size=8, num_classes=5, embed_dim=64, depth=1, num_heads=1)
    torch.save(ref.state_dict(), root / "weights" / "model-0.pth")
    monkeypatch.chdir(root / "weights")
    assert load_model("model-0.pth").labels == names
    monkeypatch.chdir(root)
    assert load_model("weights/model-0.pth").labels == names


def test_a_seed_export_keeps_how_to_load_it_beside_its_files(tmp_path):
    """README.txt in the export names the constructor upstream's predict.py must call (it builds the model that
    loads model.pth) and the preprocessing note; a status line or terminal that cuts the note loses nothing."""
    from tests.core.seed_reference import SeedVisionTransformer
    from vitstudio.core.models.seed_export import README, export_seed

    loaded = _loaded(SEED_SHAPES[next(iter(SEED_SHAPES))])
    result = export_seed(loaded, tmp_path / "upstream")
    readme = (tmp_path / "upstream" / README).read_text()
    line = next(ln.strip() for ln in readme.splitlines() if ln.strip().startswith("model = "))
    namespace = {"VisionTransformer": SeedVisionTransformer}
    exec(line, namespace)  # the README's own line builds what loads the file
    namespace["model"].load_state_dict(torch.load(tmp_path / "upstream" / "model.pth", weights_only=True))
    assert all(note in readme for note in result.notes) and line == f"model = {result.constructor}"
