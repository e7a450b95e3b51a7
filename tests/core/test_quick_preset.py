"""The quick preset (issue 22 item 1): a new head fitted on the base model's cached pooled features. The fit reaches
the optimum scikit-learn finds for the same loss; the run folder is an ordinary run (same split rules, metrics per
step, eval.json, OOD bank, probe, status) whose backbone is untouched; it loads in plain timm with equal logits, its
forward equals the head on the cached features, it evaluates, exports and resumes (nothing to do) like any run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import timm
import torch

from tests.conftest import TINY_SPEC, make_tiny_vit
from tests.core.generators import run
from tests.core.synthetic_data import make_dataset, tree_state
from vitstudio.core.jobs import Progress
from vitstudio.core.train.engine import EpochMetrics, RunWarning, fine_tune
from vitstudio.core.train.head_fit import fit_linear_head
from vitstudio.core.train.recipes import PRESETS, make_config


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("data") / "colours", per_class=20)


@pytest.fixture(scope="module")
def base_weights(tmp_path_factory):
    """A fixed tiny base model (a custom: spec alone is drawn anew at every load)."""
    from safetensors.torch import save_file

    path = tmp_path_factory.mktemp("base") / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in make_tiny_vit().state_dict().items()}, str(path))
    return str(path)


def _objective(weight, bias, x, y, l2, sample_weight=None):
    """Mean (or weighted mean) cross-entropy + l2/2 ||W||², written out in numpy."""
    z = x @ weight.T + bias
    z = z - z.max(1, keepdims=True)
    nll = -(z - np.log(np.exp(z).sum(1, keepdims=True)))[np.arange(len(y)), y]
    w = np.ones(len(y)) if sample_weight is None else sample_weight
    return float((w * nll).sum() / w.sum() + 0.5 * l2 * (weight ** 2).sum())


@pytest.mark.parametrize("balance", [False, True])
def test_head_fit_reaches_the_regularised_optimum_sklearn_finds(balance):
    """Independent reference: scikit-learn's LogisticRegression minimises C·Σ wᵢ·CEᵢ + ½||W||², the same loss as
    ours (weighted mean CE + l2/2 ||W||²) when C = 1 / (l2 · Σ wᵢ).

    `fit_linear_head` objective within 1 % of sklearn LogisticRegression's optimum for the same loss (C = 1/(l2·Σw)), ≥
    99 % agreement, val_acc consistent; reference: scikit-learn. [parametrised ×2: balanced or not]
    """
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.utils.class_weight import compute_sample_weight

    x, y = load_digits(return_X_y=True)
    keep = np.r_[np.flatnonzero(y != 3), np.flatnonzero(y == 3)[:20]]  # class 3 rare: balancing matters
    x, y = x[keep].astype(np.float32), y[keep]
    train, val = np.arange(len(y)) % 5 != 0, np.arange(len(y)) % 5 == 0
    l2 = 1e-3
    fit = fit_linear_head(x[train], y[train], 10, x[val], y[val], l2=l2, steps=200, balance=balance)
    head, steps = run(fit)
    assert 1 < len(steps) <= 200 and [s.step for s in steps] == list(range(len(steps)))
    # the fit runs on standardised features; the reference too (then the same W is penalised)
    mean, std = x[train].mean(0), x[train].std(0)
    std = np.where(std > 1e-6, std, 1.0)
    xs = (x - mean) / std
    w = compute_sample_weight("balanced", y[train]) if balance else np.ones(train.sum())
    ref = LogisticRegression(C=1 / (l2 * w.sum()), max_iter=10_000, tol=1e-10).fit(xs[train], y[train],
                                                                                    sample_weight=w)
    ours_w, ours_b = head.weight * std, head.bias + head.weight @ mean  # back to the standardised space
    ours = _objective(ours_w.astype(np.float64), ours_b, xs[train], y[train], l2, w)
    best = _objective(ref.coef_, ref.intercept_, xs[train], y[train], l2, w)
    assert best <= ours <= best * 1.01 + 1e-5
    agree = (head.logits(x[val]).argmax(1) == ref.predict(xs[val])).mean()
    assert agree >= 0.99
    assert steps[-1].val_acc == pytest.approx((head.logits(x[val]).argmax(1) == y[val]).mean(), abs=1e-6)


def _quick(data, out, model=TINY_SPEC, **kw):
    return make_config(str(data), model, str(out), preset="quick", **kw)


def test_quick_run_is_an_ordinary_run_folder(data, base_weights, tmp_path, capsys):
    """Dataset untouched; all run files present, one metrics row per step; split equals linear-probe's; backbone
    bit-identical to base; plain timm logits equal; forward = head on cached features; eval.json = `vitstudio eval`.
    [fine-tune]
    """
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.inference import forward_logits
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.train.quick import classifier_input
    from vitstudio.core.train.training_data import prepare_split

    before = tree_state(data)
    out = tmp_path / "run"
    result, records = run(fine_tune(_quick(data, out, weights=base_weights)))
    assert tree_state(data) == before  # nothing written in the dataset
    assert result.status == "finished"
    steps = [r for r in records if isinstance(r, EpochMetrics)]
    assert len(steps) == result.epochs_done >= 2
    for name in ("config.json", "model.safetensors", "class_indices.json", "metrics.csv", "split.json", "eval.json",
                 "train_config.json", "status.json", "checkpoint-last.pt", "ood_bank.safetensors", "probe"):
        assert (out / name).exists(), name
    assert (out / "metrics.csv").read_text().count("\n") == len(steps) + 1  # one row per step
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "finished" and status["data_path"] == "features"
    # the same split rules as every preset: linear-probe with the same seed splits the same files
    probe_cfg = make_config(str(data), TINY_SPEC, str(tmp_path / "lp"), preset="linear-probe")
    assert json.loads((out / "split.json").read_text()) == prepare_split(probe_cfg, tmp_path / "lp")[0].to_manifest()
    # the saved model: the base model's backbone, untouched; a new 3-class head
    base, ours = load_model(TINY_SPEC, base_weights), load_model(str(out))
    for name, tensor in base.model.state_dict().items():
        if not name.startswith("head."):
            torch.testing.assert_close(ours.model.state_dict()[name], tensor, rtol=0, atol=0)
    assert ours.labels == ["blue", "green", "red"]
    # plain timm loads the folder and computes the same logits
    plain = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(ours, x), plain(x), atol=1e-5, rtol=0)
    # the model's forward on the validation images = the fitted head on the cached features
    split = json.loads((out / "split.json").read_text())
    paths = [str(data / p) for p, _ in split["val"]]
    cached = run(embed_folder(base, paths))[0]
    head_logits = classifier_input(ours.model, cached.features_of()) @ \
        ours.model.head.weight.detach().numpy().T + ours.model.head.bias.detach().numpy()
    model_logits = run(embed_folder(ours, paths))[0]
    np.testing.assert_allclose(np.asarray(model_logits.logits[model_logits.rows]), head_logits, atol=1e-4)
    # eval.json says what `vitstudio eval` measures on the saved model
    from vitstudio.cli import main

    report = json.loads((out / "eval.json").read_text())
    assert report["accuracy"] == pytest.approx(result.best_val_acc)
    # the line names the head kept: the last step's, whose accuracy eval.json measures (not the step * marks)
    from vitstudio.cli.train import _report

    assert result.best_val_acc == steps[-1].val_acc and result.best_epoch == len(steps) - 1
    capsys.readouterr()
    _report(result)
    line = capsys.readouterr().out
    assert line.startswith(f"finished: val accuracy {report['accuracy']:.4f} (the head of step {len(steps)}, the "
                           f"last") and "best val accuracy" not in line
    capsys.readouterr()
    main(["eval", str(data), "--model", str(out)])
    assert f"accuracy {report['accuracy']:.4f} on {len(paths)} images" in capsys.readouterr().out


def test_second_run_takes_the_features_from_the_cache_and_resume_has_nothing_to_do(data, base_weights, tmp_path,
                                                                                   capsys):
    """Second run reads all features from the cache; resume says "nothing to resume" with no steps and unchanged weights
    (also via CLI); a rerun into the folder raises FileExistsError. [fine-tune]
    """
    run(fine_tune(_quick(data, tmp_path / "a", weights=base_weights)))
    result, records = run(fine_tune(_quick(data, tmp_path / "b", weights=base_weights)))
    said = [r.message for r in records if isinstance(r, Progress)]
    n = sum(1 for _ in data.rglob("*.png"))
    assert f"Features of {n} images (0 computed, {n} from the cache)" in said
    weights = (tmp_path / "b" / "model.safetensors").read_bytes()
    again, records = run(fine_tune(_quick(data, tmp_path / "b", weights=base_weights), resume=True))
    assert again.status == "finished" and again.best_val_acc == pytest.approx(result.best_val_acc)
    assert any("nothing to resume" in r.message for r in records if isinstance(r, RunWarning))
    assert not any(isinstance(r, EpochMetrics) for r in records)
    assert (tmp_path / "b" / "model.safetensors").read_bytes() == weights
    from vitstudio.cli import main

    assert main(["finetune", "--out", str(tmp_path / "b"), "--resume", "--quiet"]) == 0
    assert "nothing to resume" in capsys.readouterr().err
    with pytest.raises(FileExistsError, match="never overwritten"):
        run(fine_tune(_quick(data, tmp_path / "b", weights=base_weights)))


def test_quick_run_exports_to_onnx_and_seed_format(data, base_weights, tmp_path, capsys):
    """A quick run exports to ONNX (Runtime matches PyTorch) and to seed format. [fine-tune]"""
    pytest.importorskip("onnxruntime")
    from vitstudio.cli import main

    out = tmp_path / "run"
    run(fine_tune(_quick(data, out, weights=base_weights)))
    assert main(["export", str(out), "--onnx", str(tmp_path / "m.onnx")]) == 0
    assert "ONNX Runtime matches PyTorch" in capsys.readouterr().out
    assert main(["export", str(out), "--format", "seed", "--out", str(tmp_path / "upstream")]) == 0
    assert (tmp_path / "upstream" / "model.pth").is_file()


def _digits(root, per_class=12):
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    counts = {}
    for i, (pixels, label) in enumerate(zip(digits.images, digits.target)):
        if counts.get(label, 0) < per_class:
            counts[label] = counts.get(label, 0) + 1
            ink = (255 - pixels / 16.0 * 255).astype(np.uint8)
            folder = root / str(label)
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(ink, "L").resize((32, 32), Image.BILINEAR).convert("RGB").save(folder / f"{i:04d}.png")
    return root


def test_cli_quick_on_digits_with_the_demo_model_loads_in_plain_timm(tmp_path, capsys):
    """CLI quick on digits with the demo: preset recorded, eval accuracy ≥ 0.9, logits equal plain timm's. [fine-tune]
    """
    from vitstudio.cli import main
    from vitstudio.core.data.images import read_image
    from vitstudio.core.inference import forward_logits
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.models.loading import load_model

    demo = bundled_demo()
    if demo is None:
        pytest.skip("the bundled demo model is not in this checkout")
    data, out = _digits(tmp_path / "digits"), tmp_path / "run"
    assert main(["finetune", str(data), "--model", str(demo), "--preset", "quick", "--out", str(out), "--quiet"]) == 0
    assert "finished" in capsys.readouterr().out
    assert json.loads((out / "train_config.json").read_text())["preset"] == "quick"
    assert json.loads((out / "eval.json").read_text())["accuracy"] >= 0.9  # the demo model knows digits
    ours, plain = load_model(str(out)), timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    images = sorted(data.rglob("*.png"))[::7]
    x = torch.stack([ours.to_tensor(ours.crop(read_image(p))) for p in images])
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(ours, x), plain(x), atol=1e-5, rtol=0)


def test_a_seed_model_with_pre_logits_gets_its_head_after_the_pre_logits_layer(data, tmp_path, photos):
    """Seed models' head is fc + Tanh + out: the quick head is `out`, fitted on the features after fc + Tanh.

    A seed pre-logits model's quick head is `head.out` on 24-d post-Tanh features; logits equal that head on cached
    features. [fine-tune]
    """
    from tests.core.test_finetune_sources import _seed_folder
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.train.quick import classifier_input

    spec, _ = _seed_folder(tmp_path / "base", 24)
    out = tmp_path / "run"
    result, _ = run(fine_tune(_quick(data, out, model=spec)))
    assert result.status == "finished"
    ours = load_model(str(out))
    paths = [str(p) for p in photos.values()]
    pooled = run(embed_folder(load_model(spec), paths))[0].features_of()
    features = classifier_input(ours.model, pooled)
    assert features.shape[1] == 24
    out_layer = ours.model.head.out
    expected = features @ out_layer.weight.detach().numpy().T + out_layer.bias.detach().numpy()
    logits = run(embed_folder(ours, paths))[0]
    np.testing.assert_allclose(np.asarray(logits.logits[logits.rows]), expected, atol=1e-4)


def test_quick_is_the_first_preset_and_refuses_what_it_cannot_do(data, tmp_path):
    """Quick is the first preset with the features data path; scope=all, mixup and img_size change are refused with
    reasons and no model written.
    """
    assert list(PRESETS)[0] == "quick" and PRESETS["quick"]["data_path"] == "features"
    with pytest.raises(ValueError, match="head only"):
        _quick(data, tmp_path / "a", scope="all").validate()
    with pytest.raises(ValueError, match="mixup"):
        _quick(data, tmp_path / "b", mixup=0.2).validate()
    with pytest.raises(ValueError, match="own preprocessing"):
        run(fine_tune(_quick(data, tmp_path / "c", img_size=48)))
    assert not (tmp_path / "c").exists() or not (tmp_path / "c" / "model.safetensors").exists()


def test_cancelled_or_killed_quick_runs_are_fitted_again_on_resume(data, base_weights, tmp_path):
    """A cancel at step 1 leaves status cancelled and no model; resume finishes; a run killed after checkpoint refits to
    the same head bytes. [fine-tune]
    """
    from vitstudio.core.jobs import CancelToken

    out, token = tmp_path / "run", CancelToken()

    def cancel_at_second_step(record):
        if isinstance(record, EpochMetrics) and record.epoch == 1:
            token.cancel()

    result, _ = run(fine_tune(_quick(data, out, weights=base_weights), token), cancel_at_second_step)
    assert result.status == "cancelled" and json.loads((out / "status.json").read_text())["status"] == "cancelled"
    assert not (out / "model.safetensors").exists()
    again, records = run(fine_tune(_quick(data, out, weights=base_weights), resume=True))
    assert again.status == "finished" and (out / "model.safetensors").is_file()
    from safetensors.torch import load_file

    weights = load_file(out / "model.safetensors")
    # killed after its checkpoint but before "finished": resuming fits it again (seconds), to the same head (the same
    # tensors: each save's file carries its own pairing token with the config, so the bytes differ by that token)
    status = json.loads((out / "status.json").read_text())
    (out / "status.json").write_text(json.dumps({**status, "status": "running", "pid": 0}))
    (out / "eval.json").unlink()
    third, _ = run(fine_tune(_quick(data, out, weights=base_weights), resume=True))
    assert third.status == "finished" and (out / "eval.json").is_file()
    again_weights = load_file(out / "model.safetensors")
    assert again_weights.keys() == weights.keys()
    assert all(torch.equal(again_weights[k], weights[k]) for k in weights)
