"""Every model source fine-tunes with two presets, and the run folder loads back: in ViT Studio with the same
logits, in plain timm where timm can express the model, and (representation layer) against an independent port of
upstream's vit_model.py."""

from __future__ import annotations

import json

import pytest
import timm
import torch
from safetensors.torch import save_file

from tests.conftest import TINY, TINY_SPEC
from tests.core.generators import drain, run
from tests.core.seed_reference import SeedVisionTransformer
from tests.core.synthetic_data import make_dataset
from tests.core.test_loading import _fake_hub_cache
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import load_model
from vitstudio.core.models.modelcard import model_card
from vitstudio.core.train.engine import fine_tune
from vitstudio.core.train.recipes import make_config


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("data") / "colours", per_class=6)


def _seed_folder(root, rep_size):
    torch.manual_seed(3)
    ref = SeedVisionTransformer(img_size=32, patch_size=8, num_classes=4, embed_dim=32, depth=2, num_heads=1,
                                representation_size=rep_size)
    root.mkdir(parents=True)
    torch.save(ref.state_dict(), root / "model-3.pth")
    (root / "class_indices.json").write_text(json.dumps({str(i): n for i, n in enumerate("abcd")}))
    return str(root), None


def _source(kind, tmp_path):
    """(spec, weights) for each way a user names a model."""
    if kind == "seed":
        return _seed_folder(tmp_path / "seed", None)
    if kind == "seed-prelogits":
        return _seed_folder(tmp_path / "seed", 24)
    if kind == "custom":
        return TINY_SPEC, None
    if kind == "timm-cache":
        from huggingface_hub import constants

        name = "vit_tiny_patch16_224.augreg_in21k_ft_in1k"
        torch.manual_seed(0)
        model = timm.create_model("vit_tiny_patch16_224", num_classes=1000)
        save_file(model.state_dict(), str(tmp_path / "m.safetensors"))
        _fake_hub_cache(__import__("pathlib").Path(constants.HF_HUB_CACHE), f"timm/{name}",
                        {"model.safetensors": (tmp_path / "m.safetensors").read_bytes()})
        return name, None
    if kind == "hf-hub":
        from huggingface_hub import constants
        from timm.models import save_for_hf

        model = timm.create_model("vit_base_patch16_224", pretrained=False, **TINY)
        save_for_hf(model, str(tmp_path / "hub"), safe_serialization=True)
        _fake_hub_cache(__import__("pathlib").Path(constants.HF_HUB_CACHE), "someone/tiny-vit",
                        {n: (tmp_path / "hub" / n).read_bytes() for n in ("config.json", "model.safetensors")})
        return "hf-hub:someone/tiny-vit", None
    raise AssertionError(kind)


def _x(loaded, photo):
    return loaded.to_tensor(loaded.crop(read_image(photo)))[None]


SOURCES = ["seed", "seed-prelogits", "custom", "timm-cache", "hf-hub", "run-folder"]


@pytest.mark.parametrize("preset", ["linear-probe", "seed"])
@pytest.mark.parametrize("kind", SOURCES)
def test_every_source_fine_tunes_and_loads_back(kind, preset, data, tmp_path, photos):
    """6 sources × linear-probe/seed: run finishes, no borrowed tag, labels; logits = plain timm `local-dir:`, or for
    pre-logits (refused by plain timm) the upstream vit_model.py port. [parametrised ×12] [fine-tune]
    """
    if kind == "run-folder":  # a fine-tuned run is itself a model source
        first = make_config(str(data), TINY_SPEC, str(tmp_path / "first"), "linear-probe", epochs=1, batch_size=4)
        drain(fine_tune(first))
        spec, weights = str(tmp_path / "first"), None
    else:
        spec, weights = _source(kind, tmp_path)
    out = tmp_path / "run"
    config = make_config(str(data), spec, str(out), preset, weights=weights, epochs=1, batch_size=4, img_size=32)
    result = drain(fine_tune(config))
    assert result.status == "finished" and (out / "model.safetensors").is_file()

    saved = json.loads((out / "config.json").read_text())
    assert "tag" not in saved["pretrained_cfg"]  # no borrowed pretrained tag
    assert saved["vitstudio"]["base_model"] == spec and saved["label_names"] == ["blue", "green", "red"]
    loaded = load_model(str(out))
    assert loaded.labels == ["blue", "green", "red"]
    x = _x(loaded, photos["chelsea"])
    ours = forward_logits(loaded, x)
    if kind == "seed-prelogits":  # plain timm cannot build it: said in config.json and on the card
        assert saved["vitstudio"]["representation_size"] == 24 and "Plain timm cannot" in saved["vitstudio"]["note"]
        assert any("pre-logits" in v for _, v in model_card(loaded).lines())
        with pytest.raises(Exception):  # noqa: B017  (timm's own error on the unexpected head keys)
            timm.create_model(f"local-dir:{out}", pretrained=True)
        ref = SeedVisionTransformer(img_size=32, patch_size=8, num_classes=3, embed_dim=32, depth=2, num_heads=1,
                                    representation_size=24).eval()
        state = {k.replace("head.fc.", "pre_logits.fc.").replace("head.out.", "head."): v
                 for k, v in loaded.model.state_dict().items()}
        ref.load_state_dict(state)
        with torch.no_grad():
            torch.testing.assert_close(ours, ref(x), atol=1e-5, rtol=0)
    else:
        plain = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
        with torch.no_grad():
            torch.testing.assert_close(ours, plain(x), atol=1e-5, rtol=0)


def test_arch_with_weights_file_fine_tunes(data, tmp_path, photos):
    """`--model ARCH --weights FILE` (here timm's ViT-Ti entry point with a weights file of its shape).

    [fine-tune]
    """
    torch.manual_seed(1)
    model = timm.create_model("vit_tiny_patch16_224", num_classes=7)
    save_file(model.state_dict(), str(tmp_path / "ti.safetensors"))
    out = tmp_path / "run"
    config = make_config(str(data), "vit_tiny_patch16_224", str(out), "linear-probe",
                         weights=str(tmp_path / "ti.safetensors"), epochs=1, batch_size=4, img_size=32)
    assert drain(fine_tune(config)).status == "finished"
    loaded = load_model(str(out))
    plain = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    x = _x(loaded, photos["rocket"])
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(loaded, x), plain(x), atol=1e-5, rtol=0)


def _digits(root, names, per_class=40):
    """scikit-learn's digits rendered as the demo model saw them, `per_class` of each, in folders `names`."""
    import numpy as np
    from PIL import Image

    from vitstudio.core.models.demo import digit_scans  # load_digits' file, without importing sklearn (~1.5 s)

    counts = dict.fromkeys(range(10), 0)
    for pixels, label in zip(*digit_scans()):
        if counts[label] >= per_class:
            continue
        counts[label] += 1
        folder = root / names[label]
        folder.mkdir(parents=True, exist_ok=True)
        ink = (255 - pixels / 16.0 * 255).astype(np.uint8)
        Image.fromarray(ink, "L").resize((32, 32), Image.BILINEAR).convert("RGB").save(folder / f"{counts[label]}.png")
    return root


def test_renamed_digits_get_a_really_new_head(tmp_path):
    """The issue's 9 % case: the bundled digits model fine-tuned on the same digits in folders zero…nine used
    to keep its old head (same seed) and learn a permutation. Now the head is new and the run learns; with
    folders named like the model's labels, the head starts from the old rows and is right from epoch 1.

    [fine-tune]
    """
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.core.train.engine import EpochMetrics, RunWarning

    demo = bundled_demo()
    assert demo is not None
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    data = _digits(tmp_path / "words", words)
    config = make_config(str(data), str(demo), str(tmp_path / "run"), "last-blocks", epochs=3, scale=(0.75, 1.0),
                         hflip=0.0)
    result, records = run(fine_tune(config))
    assert result.best_val_acc >= 0.7, [r.val_acc for r in records if isinstance(r, EpochMetrics)]
    assert not any(isinstance(r, RunWarning) for r in records)
    old = load_model(str(demo)).model.head.weight.detach()
    new = load_model(str(tmp_path / "run")).model.head.weight.detach()
    assert min(float((new[i] - old).norm(dim=1).min()) for i in range(10)) > 1e-3  # no row is an old row

    same = _digits(tmp_path / "same", [str(i) for i in range(10)])
    config = make_config(str(same), str(demo), str(tmp_path / "run2"), "linear-probe", epochs=1, lr=1e-5)
    result = drain(fine_tune(config))
    assert result.best_val_acc >= 0.9  # the old rows, reused: right from the first epoch


def test_chance_level_run_warns(tmp_path):
    """Three classes of the very same image: nothing can be learned, every prediction is one class, validation
    accuracy is exactly chance. The run says so once, in the stream and in status.json.

    Three classes of one identical image: val acc exactly 1/3, one "chance level" warning said and one update (the third
    epoch's figure), status.json holding the latest, and a "no split can keep them apart" warning. [fine-tune] The
    linear-probe run's warning advises last-blocks or full.
    """
    from PIL import Image

    from vitstudio.core.train.engine import RunWarning

    picture = Image.new("RGB", (32, 32), (90, 120, 200))
    for name in ("a", "b", "c"):
        (tmp_path / "same" / name).mkdir(parents=True)
        for i in range(6):
            picture.save(tmp_path / "same" / name / f"{i}.png")
    config = make_config(str(tmp_path / "same"), TINY_SPEC, str(tmp_path / "run"), "linear-probe", epochs=3,
                         batch_size=4)
    result, records = run(fine_tune(config))
    assert result.best_val_acc == pytest.approx(1 / 3)
    warnings = [r.message for r in records if isinstance(r, RunWarning) and not r.update]
    chance = [w for w in warnings if "chance level" in w]
    assert len(chance) == 1 and "(try last-blocks or full)" in chance[0]  # linear-probe: the backbone is frozen
    latest = [r.message for r in records if isinstance(r, RunWarning) and r.update]
    assert len(latest) == 1 and "after 3 epochs" in latest[0]  # the third epoch updated the figure
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["warnings"] == [latest[0] if w in chance else w for w in warnings]
    # every image is a copy of every other: no split can keep copies apart, and the run says so
    assert "no split can keep them apart" in warnings[0]


@pytest.mark.parametrize("rep_size", [None, 24])
def test_seed_export_runs_in_upstream(rep_size, data, tmp_path, photos, capsys):
    """A fine-tuned seed model exported with `--format seed` loads strictly into an independent port of upstream's
    vit_model.py (as its predict.py does) and gives the same logits; class_indices.json is upstream's.

    `export --format seed` state dict loads strictly into the upstream vit_model.py port with equal logits, upstream
    class_indices.json, and reads back as a seed checkpoint; reference: upstream vit_model.py (seed_reference).
    [parametrised ×2] [fine-tune]
    """
    from vitstudio.cli import main

    spec, _ = _seed_folder(tmp_path / "base", rep_size)
    out = tmp_path / "run"
    drain(fine_tune(make_config(str(data), spec, str(out), "seed", epochs=1, batch_size=4, img_size=32)))
    assert main(["export", str(out), "--format", "seed", "--out", str(tmp_path / "upstream")]) == 0
    printed = capsys.readouterr()
    assert f"representation_size={rep_size}" in printed.out and "note: upstream's predict.py" in printed.err
    state = torch.load(tmp_path / "upstream" / "model.pth", weights_only=True)
    assert ("pre_logits.fc.weight" in state) == bool(rep_size)
    ref = SeedVisionTransformer(img_size=32, patch_size=8, num_classes=3, embed_dim=32, depth=2, num_heads=1,
                                representation_size=rep_size).eval()
    ref.load_state_dict(state)  # strict: upstream's names, nothing more, nothing less
    indices = json.loads((tmp_path / "upstream" / "class_indices.json").read_text())
    assert indices == {"0": "blue", "1": "green", "2": "red"}
    loaded = load_model(str(out))
    x = _x(loaded, photos["coffee"])
    with torch.no_grad():
        torch.testing.assert_close(ref(x), forward_logits(loaded, x), atol=1e-5, rtol=0)
    again = load_model(str(tmp_path / "upstream"))  # and ViT Studio reads the export back as a seed checkpoint
    assert again.labels == ["blue", "green", "red"]
    torch.testing.assert_close(forward_logits(again, x), forward_logits(loaded, x), atol=1e-5, rtol=0)


def test_seed_export_refuses_what_upstream_cannot_hold(tmp_path):
    """Exporting a model with register tokens raises ValueError naming reg_token."""
    from vitstudio.core.models.seed_export import export_seed

    model = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=1, num_heads=2, reg_tokens=2, num_classes=3)
    from vitstudio.core.models.loading import loaded_module

    loaded = loaded_module(model, "registers", source="test")
    with pytest.raises(ValueError, match="cannot be written in upstream's vit_model.py format.*reg_token"):
        export_seed(loaded, tmp_path / "x")


def test_the_chance_level_advice_names_only_what_trains_more():
    """Issue 29, item 11: under full the warning does not advise "try last-blocks or full" (nothing is frozen);
    under last-blocks it advises full only; the head-only presets both.

    The chance-level causes name a frozen backbone only for presets that freeze part of it, and advise only what trains
    more (full: none; last-blocks: full; head-only presets: last-blocks or full) (issue 29, item 11).
    """
    from vitstudio.core.train.engine import chance_message
    from vitstudio.core.train.recipes import PRESETS

    def advice(preset):
        return chance_message(1 / 3, 3, 2, PRESETS[preset]["scope"])

    assert "frozen" not in advice("full") and "last-blocks" not in advice("full") and "frozen" not in advice("scratch")
    assert "(try full)" in advice("last-blocks") and "last-blocks or" not in advice("last-blocks")
    for preset in ("quick", "linear-probe", "seed"):
        assert "(try last-blocks or full)" in advice(preset), preset
    assert advice("full").startswith("Validation accuracy is still at chance level (33.3 % for 3 classes after 2")


def test_the_chance_level_warning_is_said_once_then_updated_then_withdrawn():
    """Issue 29, item 11: from the second epoch at chance the warning is said (printed once by the CLI), then each
    epoch updates its figure in place (status.json keeps one, the latest), and it is withdrawn once the run does
    better than chance."""
    from types import SimpleNamespace

    from vitstudio.core.train.records import chance_warning

    run = SimpleNamespace(best_acc=0.30, warnings=["Class red has 6 images"], start_epoch=0,
                          config=SimpleNamespace(scope="all"))
    assert chance_warning(run, 0, 3) is None  # after one epoch: too early to tell
    said = chance_warning(run, 1, 3)
    assert said.kind == "chance level" and not said.update and "33.3 %" not in said.message and "30.0 %" in said.message
    run.best_acc = 0.36
    updated = chance_warning(run, 2, 3)
    assert updated.update and "36.0 %" in updated.message and "after 3 epochs" in updated.message
    assert run.warnings == ["Class red has 6 images", updated.message]
    run.best_acc = 0.71
    withdrawn = chance_warning(run, 3, 3)
    assert withdrawn.update and withdrawn.message == "" and run.warnings == ["Class red has 6 images"]
    assert chance_warning(run, 4, 3) is None


def test_the_eta_is_the_whole_run_left_including_validation():
    """Issue 29, item 11: 4 epochs of 8 s of steps and 4 s of validation. From the first validation on the
    whole-run ETA is the time left; the old one (images left over the current epoch's step rate) left validation
    out, a third of the run here."""
    from vitstudio.core.train.records import RunClock

    epochs, train, val, steps = 4, 8.0, 4.0, 10
    clock = RunClock(started=100.0)
    for epoch in range(epochs):
        for step in range(1, steps + 1):
            now = 100.0 + epoch * (train + val) + step * train / steps
            left = epochs * (train + val) - (now - 100.0)
            old = (steps - step + (epochs - epoch - 1) * steps) / (steps / train)
            ours = clock.eta(now, epoch + step / steps, epochs)
            if epoch > 0:
                assert ours == pytest.approx(left), (epoch, step)
                assert abs(old - left) >= val - 1e-9  # at least this epoch's validation missing
        clock.validated(val)
    assert RunClock(started=1.0).eta(5.0, 0.0, 4) == 0.0


def test_the_whole_learning_rate_schedule_is_drawn_again_from_the_run_folder(tmp_path):
    """Issue 29, item 12: the learning-rate curve of a run read back (one rate per epoch) or resumed (live steps from
    the checkpoint) lacked its warm-up. `run_schedule` replays timm's schedule from the folder's settings and the
    updates per epoch its status.json records: it equals every rate the run reported while it trained.

    [fine-tune]
    """
    from vitstudio.core.train.engine import StepProgress
    from vitstudio.core.train.lr_schedule import run_schedule

    data = make_dataset(tmp_path / "data", per_class=6)
    config = make_config(str(data), TINY_SPEC, str(tmp_path / "run"), "scratch", epochs=3, batch_size=4,
                         warmup_epochs=1)
    _, records = run(fine_tune(config))
    reported = [(r.epoch + r.step / r.steps, r.lr) for r in records if isinstance(r, StepProgress)]
    curve = dict(run_schedule(tmp_path / "run"))
    assert len(curve) == 3 * json.loads((tmp_path / "run" / "status.json").read_text())["steps_per_epoch"]
    for x, lr in reported:
        assert curve[x] == pytest.approx(lr, rel=1e-6), x
    rates = list(curve.values())
    assert rates[0] < rates[len(rates) // 3 - 1] <= config.lr * 1.0001  # the warm-up: up to the peak in epoch 1
    assert rates[-1] < rates[len(rates) // 3]  # then the cosine down
    assert len(run_schedule(tmp_path / "run", 1)) == len(curve) // 3  # the epochs before a resume point


def test_a_tie_in_accuracy_keeps_the_epoch_with_the_lower_validation_loss(tmp_path, monkeypatch):
    """Seen in the afternoon walk: with 8 validation images, 100 % at epoch 1 tied every later epoch and the run
    kept epoch 1's model for 40 epochs. Ties go to the lower validation loss; the result, the status line and the
    model's config say which epoch is kept, and a resume keeps the record.

    [fine-tune]
    """
    from vitstudio.core.train import engine
    from vitstudio.core.train.engine import fine_tune

    scores = iter([(0.9, 1.0), (0.5, 1.0), (0.3, 1.0), (0.4, 1.0)])
    monkeypatch.setattr(engine, "validation_pass", lambda *a, **k: next(scores))
    data = make_dataset(tmp_path / "data", per_class=4)
    config = make_config(str(data), TINY_SPEC, str(tmp_path / "run"), "scratch", epochs=4, batch_size=4)
    result, _ = run(fine_tune(config))
    assert result.best_epoch == 2 and result.kept == " (the model of epoch 3)"
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert "epoch 3" in json.dumps(saved) and json.loads((tmp_path / "run" / "status.json").read_text())[
        "best_epoch"] == 2
    state = torch.load(tmp_path / "run" / "checkpoint-last.pt", weights_only=False)
    assert state["best_loss"] == pytest.approx(0.3) and state["best_epoch"] == 2
