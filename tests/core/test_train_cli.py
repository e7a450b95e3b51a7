"""`vitstudio finetune | eval | export`, the evaluation numbers against scikit-learn, and the demo dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset
from vitstudio.cli import main

SPEC3 = TINY_SPEC.replace("classes=5", "classes=3")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    data = make_dataset(root / "data", per_class=20)
    out = root / "run"
    assert main(["finetune", str(data), "--model", SPEC3, "--preset", "scratch", "--epochs", "8", "--batch-size",
                 "16", "--lr", "2e-3", "--out", str(out), "--quiet"]) == 0
    return data, out


def test_finetune_cli_writes_a_run_and_refuses_to_overwrite(trained, capsys):
    """A finished run has model and status; rerun into it or into the dataset is exit 2 "never overwritten". [fine-tune]
    """
    data, out = trained
    assert (out / "model.safetensors").is_file()
    assert json.loads((out / "status.json").read_text())["status"] == "finished"
    assert main(["finetune", str(data), "--model", SPEC3, "--out", str(out), "--quiet"]) == 2
    assert "never overwritten" in capsys.readouterr().err
    assert main(["finetune", str(data), "--model", SPEC3, "--out", str(data / "inside"), "--quiet"]) == 2


def test_eval_matches_scikit_learn(trained, tmp_path, capsys):
    """Eval JSON confusion matrix, per-class precision/recall/F1/support and misclassified count equal scikit-learn on
    the model's own predictions; reference: sklearn.metrics.
    """
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    data, out = trained
    report_file = tmp_path / "report.json"
    assert main(["eval", str(data), "--model", str(out), "--json", str(report_file)]) == 0
    report = json.loads(report_file.read_text())
    # recompute from the model's own predictions on the run's validation split, with scikit-learn
    from vitstudio.core.data.datasets import Split
    from vitstudio.core.data.images import read_image
    from vitstudio.core.inference import classify
    from vitstudio.core.models.loading import load_model

    loaded = load_model(str(out))
    split = Split.from_manifest(json.loads((out / "split.json").read_text()), data)
    preds = [classify(loaded, [read_image(p)], topk=1)[0].indices[0] for p, _ in split.val]
    truth = [label for _, label in split.val]
    np.testing.assert_array_equal(report["confusion"], confusion_matrix(truth, preds, labels=[0, 1, 2]))
    p, r, f, s = precision_recall_fscore_support(truth, preds, labels=[0, 1, 2], zero_division=0)
    for i, row in enumerate(report["per_class"]):
        assert row["precision"] == pytest.approx(p[i]) and row["recall"] == pytest.approx(r[i])
        assert row["f1"] == pytest.approx(f[i]) and row["support"] == s[i]
    assert len(report["misclassified"]) == sum(a != b for a, b in zip(truth, preds))
    assert "accuracy" in capsys.readouterr().out


def test_eval_on_a_run_uses_its_validation_split_however_named(trained, capsys):
    """By path or by its name under models/: the run's validation split; --all: every image. The confusion matrix
    and the most confident mistakes are printed."""
    import shutil

    from vitstudio.core.models.catalog import models_dir

    data, out = trained
    named = models_dir() / "colours-run"
    shutil.copytree(out, named)
    val = len(json.loads((out / "split.json").read_text())["val"])
    for model in (str(out), "colours-run"):
        assert main(["eval", str(data), "--model", model]) == 0
        text = capsys.readouterr().out
        assert f"on {val} images: the run's validation split" in text, text
        assert "confusion matrix (rows: true class, columns: predicted)" in text
    assert main(["eval", str(data), "--model", "colours-run", "--all"]) == 0
    text = capsys.readouterr().out
    assert "on 60 images: every image" in text
    rows = text.split("columns: predicted)")[1].splitlines()[2:5]
    assert sum(int(v) for row in rows for v in row.split()[1:]) == 60


def test_onnx_export_matches(trained, tmp_path, capsys):
    """ONNX export matches PyTorch in onnxruntime (atol 1e-4); opset 13 refused; metadata
    labels/mean/input_size/interpolation; `--format onnx --out` works; reference: onnxruntime. An output folder that
    does not exist yet is made; a file where a folder should be is one line, exit 1 (a traceback on the temporary file,
    exit 0: the walk).
    """
    pytest.importorskip("onnxruntime")
    _, out = trained
    onnx_file = tmp_path / "m.onnx"
    assert main(["export", str(out), "--onnx", str(onnx_file)]) == 0
    assert "ONNX Runtime matches PyTorch" in capsys.readouterr().out
    import onnxruntime as ort

    from vitstudio.core.inference import forward_logits
    from vitstudio.core.models.loading import load_model

    x = torch.randn(4, 3, 32, 32)
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"image": x.numpy()})[0], forward_logits(load_model(str(out)), x),
                               atol=1e-4)
    assert main(["export", str(out), "--onnx", str(tmp_path / "old.onnx"), "--opset", "13"]) == 2
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(onnx_file)).metadata_props}  # what goes in, what comes out
    loaded = load_model(str(out))
    assert json.loads(meta["labels"]) == ["blue", "green", "red"]
    assert json.loads(meta["mean"]) == list(loaded.data_config["mean"])
    assert json.loads(meta["input_size"]) == [3, 32, 32] and meta["interpolation"] == "bicubic"
    assert main(["export", str(out), "--format", "onnx", "--out", str(tmp_path / "b.onnx")]) == 0
    # an output folder that does not exist yet is made (a traceback on its temporary file, exit 0: the walk)
    assert main(["export", str(out), "--format", "onnx", "--out", str(tmp_path / "new" / "deeper" / "c.onnx")]) == 0
    assert (tmp_path / "new" / "deeper" / "c.onnx").is_file()
    (tmp_path / "a-file").write_text("")  # a file where a folder should be: one line, exit 1
    capsys.readouterr()
    assert main(["export", str(out), "--format", "onnx", "--out", str(tmp_path / "a-file" / "d.onnx")]) == 1
    err = capsys.readouterr().err
    assert err == f"error: could not write {tmp_path / 'a-file' / 'd.onnx'}: {tmp_path / 'a-file'} is a file, not a " \
                  "folder\n"


def test_export_attention_over_training(trained, tmp_path, capsys):
    """Exports a GIF with one frame per epoch; a non-run model is exit 2 "not a run folder"."""
    _, out = trained
    assert main(["export", str(out), "--out", str(tmp_path / "a.gif")]) == 0
    import imageio.v3 as iio

    assert iio.imread(tmp_path / "a.gif").shape[0] == 8  # one frame per epoch
    assert main(["export", TINY_SPEC, "--format", "gif", "--out", str(tmp_path / "b.gif")]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_digits_demo_dataset(tmp_path):
    """`render_digits` makes 10 classes, 1797 images, 32×32 white paper with dark ink."""
    from PIL import Image

    from vitstudio.core.data.datasets import scan_dataset
    from vitstudio.core.models.demo import render_digits

    scan = scan_dataset(render_digits(tmp_path / "digits"))
    assert scan.classes == tuple(str(d) for d in range(10)) and scan.total == 1797
    img = np.asarray(Image.open(scan.train["0"][0]))
    assert img.shape == (32, 32, 3) and img.max() == 255 and img.min() < 100  # white paper, dark ink


def test_bundled_demo_model_reads_the_sample_digits():
    """The bundled demo has digit labels, reads every sample digit correctly, eval accuracy ≥ 0.95."""
    from vitstudio.core.data.images import read_image
    from vitstudio.core.inference import classify
    from vitstudio.core.models.demo import bundled_demo, sample_images
    from vitstudio.core.models.loading import load_model

    demo = bundled_demo()
    assert demo is not None, "models/digits-vit is part of the repository"
    loaded = load_model(str(demo))
    assert loaded.labels == [str(d) for d in range(10)]
    samples = sample_images()
    assert len(samples) >= 5
    preds = classify(loaded, [read_image(p) for p in samples], [p.name for p in samples], topk=1)
    assert [p.labels[0] for p in preds] == [p.name.split("-")[1] for p in samples]
    report = json.loads((demo / "eval.json").read_text())
    assert report["accuracy"] >= 0.95


def test_augmentation_and_balance_flags(tmp_path, capsys):
    """Augmentation is set from the CLI and recorded; photometric augmentation runs on timm's PIL path; an
    imbalanced dataset warns, and --balance weighs the classes instead.

    Augmentation flags recorded in train_config; imbalance warns (stderr and status); `--balance` silences it with
    inverse-frequency class weights; bad scale range is exit 2. [fine-tune]
    """
    from tests.core.synthetic_data import COLOURS
    from vitstudio.core.train.engine import class_weights
    from vitstudio.core.train.recipes import TrainConfig

    data = make_dataset(tmp_path / "data", per_class=12)
    for extra in list((data / "blue").iterdir())[3:]:  # blue keeps 3 of 12: red and green have 4x as many
        extra.unlink()
    out = tmp_path / "run"
    assert main(["finetune", str(data), "--model", SPEC3, "--out", str(out), "--epochs", "1", "--batch-size", "4",
                 "--scale", "0.75", "1", "--hflip", "0", "--color-jitter", "0.2", "--randaugment", "rand-m5-mstd0.5",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "warning: Classes are imbalanced: green has 12 images, blue only 3 (4.0×)" in err
    config = TrainConfig.from_json((out / "train_config.json").read_text())
    assert (config.scale, config.hflip, config.color_jitter, config.auto_augment) == ((0.75, 1.0), 0.0, 0.2,
                                                                                      "rand-m5-mstd0.5")
    status = json.loads((out / "status.json").read_text())
    assert any("imbalanced" in w for w in status["warnings"])
    out2 = tmp_path / "balanced"
    assert main(["finetune", str(data), "--model", SPEC3, "--out", str(out2), "--epochs", "1", "--batch-size", "4",
                 "--balance", "--quiet"]) == 0
    assert "imbalanced" not in capsys.readouterr().err
    from vitstudio.core.data.datasets import Split

    split = Split.from_manifest(json.loads((out2 / "split.json").read_text()))
    weights = class_weights(split)
    counts = [sum(1 for _, label in split.train if label == c) for c in range(len(COLOURS))]
    torch.testing.assert_close(weights, torch.tensor([sum(counts) / (3 * n) for n in counts]))
    assert main(["finetune", str(data), "--model", SPEC3, "--out", str(tmp_path / "bad"), "--scale", "0.9", "0.2",
                 "--quiet"]) == 2
    assert "crop scale range" in capsys.readouterr().err


# -- one schema for training settings: the options are generated from TrainConfig's fields --------------------------

def _finetune_parser():
    import argparse

    from vitstudio.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["finetune"]


def test_finetune_has_an_option_for_every_setting_named_after_its_field(capsys):
    """Every TrainConfig field (but `extra`) has a `--field-name` option in help; old aliases still listed."""
    import dataclasses

    from vitstudio.core.train.recipes import TrainConfig
    from vitstudio.core.train.schema import settings_of

    names = [s.name for s in settings_of(TrainConfig)]
    assert names == [f.name for f in dataclasses.fields(TrainConfig) if f.name != "extra"]  # only `extra` is free
    assert main(["finetune", "--help"]) == 0
    text = capsys.readouterr().out
    for name in names:
        assert f"--{name.replace('_', '-')}" in text, name
    for alias in ("--out", "--probe", "--randaugment", "--no-reuse-head"):  # earlier names still work
        assert alias in text


def test_every_setting_can_be_set_from_the_command_line(tmp_path):
    """A value other than the default for every field (the nine the CLI could not set before among them) reaches
    the TrainConfig; the earlier option names are aliases of the new ones."""
    from vitstudio.cli.train import _finetune_config
    from vitstudio.core.train.recipes import TrainConfig
    from vitstudio.core.train.schema import settings_of

    values = dict(weights="w.safetensors", scope="all", last_blocks=3, lora_r=8, lora_alpha=32.0, lora_dropout=0.2,
                  lora_targets=("qkv", "fc1"), epochs=4, batch_size=6, grad_accum=2,
                  opt="momentum", lr=0.002, momentum=0.8, weight_decay=0.01, filter_bias_and_norm=False,
                  layer_decay=0.7, warmup_epochs=0.5, min_lr_ratio=0.05, step_on_epochs=True, label_smoothing=0.1,
                  mixup=0.2, cutmix=0.3, drop_path=0.1, ema_decay=0.99, patience=3, precision="fp32", device="cpu",
                  seed=7, img_size=64, val_ratio=0.3, split_rule="upstream", reuse_head=False, text_head=False,
                  prompt="a photo of a {}", hflip=0.0,
                  scale=(0.5, 0.9), color_jitter=0.4, auto_augment="rand-m9-mstd0.5", balance=True,
                  mean=(0.4, 0.5, 0.6), std=(0.2, 0.3, 0.4), interpolation="bilinear", crop_pct=0.9, workers=2,
                  data_path="pil", cache_memory_gb=0.5, channels_last=True, grad_checkpointing=True, compile=True,
                  fused_optimizer=False,
                  probe_image="probe.png", exclude=("a.png", "b.png"))
    fixed = {"data_dir", "model", "out_dir", "preset"}
    assert set(values) | fixed == {s.name for s in settings_of(TrainConfig)}
    argv = ["finetune", "--data-dir", str(tmp_path / "d"), "--model", "m", "--out-dir", str(tmp_path / "o"),
            "--preset", "full"]
    for s in settings_of(TrainConfig):
        if s.name in fixed:
            continue
        value = values[s.name]
        if s.kind is bool:
            argv.append(s.flag if value else f"--no-{s.flag[2:]}")
        else:
            argv += [s.flag, *map(str, value if isinstance(value, tuple) else (value,))]
    args = _finetune_parser().parse_args(argv[1:])
    args.data_dir = args.data_dir or args.data_dir_arg
    config, resume = _finetune_config(args, given=True)
    assert not resume and config.preset == "full"
    for name, value in values.items():
        assert getattr(config, name) == value, name
    aliased = _finetune_parser().parse_args(["d", "--out", "o", "--probe", "p.png", "--randaugment", "rand-m5",
                                             "--no-reuse-head"])
    assert (aliased.data_dir_arg, aliased.out_dir, aliased.probe_image, aliased.auto_augment,
            aliased.reuse_head) == ("d", "o", "p.png", "rand-m5", False)


def test_a_new_field_in_the_schema_becomes_an_option():
    """The options are generated: a field added to a copy of the schema gets its option, help and range."""
    import argparse
    import dataclasses

    from vitstudio.cli.common import add_config_options
    from vitstudio.core.train.recipes import TrainConfig
    from vitstudio.core.train.schema import Range, setting, settings_of

    grown = dataclasses.make_dataclass("GrownConfig", [("new_knob", "float", setting(
        0.5, label="Knob strength", help="a knob added in a test", range=Range(0, 1)))], bases=(TrainConfig,))
    before, after = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_config_options(before, settings_of(TrainConfig))
    add_config_options(after, settings_of(grown))
    assert len(after._actions) == len(before._actions) + 1
    assert after.parse_args(["--new-knob", "0.25"]).new_knob == 0.25
    assert "a knob added in a test; in [0, 1]" in after.format_help()
    with pytest.raises(ValueError, match=r"^new_knob \(knob strength\) must be in \[0, 1\], not 2\.$"):
        settings_of(grown)[-1].check(2.0)


def test_range_errors_name_the_field_and_its_range(tmp_path, capsys):
    """Out-of-range lr, mean (each value), min_lr_ratio, crop_pct are refused while the command line is parsed (before
    torch loads), in exactly one line in the setting's own words — "error: <field> (<label>) must be in <range>, not
    <v>." as the Training tab's status line says it (test_validation_message_is_the_clis) — and no run folder."""
    data = make_dataset(tmp_path / "data", per_class=4)
    for option, message in ((["--lr", "0"], "lr (learning rate) must be in (0, 10], not 0."),
                            (["--mean", "2", "0", "0"],
                             "mean (normalisation mean) must be in [0, 1] (each value), not (2, 0, 0)."),
                            (["--min-lr-ratio", "1.5"], "min_lr_ratio (final lr ratio) must be in [0, 1], not 1.5."),
                            (["--interpolation", "bilinear", "--crop-pct", "0"],
                             "crop_pct (centre-crop fraction) must be in (0, 2], not 0.")):
        assert main(["finetune", str(data), "--model", SPEC3, "--out", str(tmp_path / "x"), *option,
                     "--quiet"]) == 2
        assert capsys.readouterr().err.strip() == f"error: {message}"
    assert not (tmp_path / "x").exists()
