"""Teach (issue 51): Teachable Machine's split and recipe checked against transcriptions written here from its source
(teachablemachine-community, libraries/image/src/teachable-mobilenet.ts), the quick head beside it on the same
features, a Teach project as a dataset the other tools read, the export run on every sample (and a differing sample
named), and `vitstudio teach` end to end and on bad input. One module-scoped digits project on the bundled demo."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from tests.core.generators import drain
from vitstudio.cli import main
from vitstudio.core.jobs import Cancelled, CancelToken
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.core.teach.export import compare, export_taught
from vitstudio.core.teach.heads import fit_teachable_machine
from vitstudio.core.teach.project import add_images, create_project, open_project
from vitstudio.core.teach.session import TeachResult, fit_features, image_probabilities, project_features
from vitstudio.core.teach.split import TeachSplit, teachable_split


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """(the demo model, a class-folder project of 10 digits per class, its features), the cache in tmp."""
    from vitstudio.core.models.loading import load_model

    root = tmp_path_factory.mktemp("teach")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VITSTUDIO_CACHE_DIR", str(root / "cache"))
        loaded = load_model(str(bundled_demo()), device="cpu", precision="fp32")
        project = open_project(render_digits(root / "digits", per_class=10))
        features = drain(project_features(loaded, project))
    return loaded, project, features


def test_teachable_split_holds_out_ceil_15_percent_of_each_class():
    """numValidation = Math.ceil(0.15 · n) per class (ts:226); the counts below are node's Math.ceil(0.15 * n).

    Per class ⌈0.15·n⌉ held out (node's Math.ceil(0.15 * n) for n = 1…100), train and validation disjoint and complete,
    the same for the same seed; reference: teachable-mobilenet.ts:226.
    """
    expected = {1: 1, 2: 1, 6: 1, 7: 2, 20: 3, 21: 4, 100: 15}
    labels = np.concatenate([np.full(n, i) for i, n in enumerate(expected)])
    split = teachable_split(labels, seed=3)
    assert sorted(np.concatenate([split.train, split.val])) == list(range(len(labels)))
    for i, n in enumerate(expected.values()):
        assert (labels[split.val] == i).sum() == n and (labels[split.train] == i).sum() == list(expected)[i] - n
    again = teachable_split(labels, seed=3)
    assert np.array_equal(again.val, split.val) and not np.array_equal(teachable_split(labels, 4).val, split.val)


def _tfjs_reference(x, y, classes, w1, b1, w2, order, epochs):
    """Teachable Machine's training in numpy, from ts:311-359 and tfjs' Adam (β 0.9/0.999, ε 1e-7): the dataset in one
    shuffled order, batches of 16, d(CE∘softmax)/dz = (p − y)/B, backpropagated by hand."""
    params = [w1.astype(np.float64), b1.astype(np.float64), w2.astype(np.float64)]
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    x, y, step = x[order].astype(np.float64), y[order], 0
    for _ in range(epochs):
        for start in range(0, len(y), 16):
            xb, yb = x[start:start + 16], np.eye(classes)[y[start:start + 16]]
            pre = xb @ params[0].T + params[1]
            hidden = np.maximum(pre, 0)
            z = hidden @ params[2].T
            p = np.exp(z - z.max(1, keepdims=True))
            dz = (p / p.sum(1, keepdims=True) - yb) / len(yb)
            dh = (dz @ params[2]) * (pre > 0)
            grads, step = [dh.T @ xb, dh.sum(0), dz.T @ hidden], step + 1
            for i, g in enumerate(grads):
                m, v = moments[i]
                m[:] = 0.9 * m + 0.1 * g
                v[:] = 0.999 * v + 0.001 * g * g
                params[i] -= 1e-3 * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-7)
    return params


def test_teachable_machine_recipe_matches_a_numpy_transcription_and_the_quick_head_beats_it(digits):
    """The TM head's init is VarianceScaling (σ = √(1/fan_in), cut at 2σ, no second bias); 3 epochs equal a numpy
    transcription of its Adam/batch-16 loop (hand backprop) within 2e-5; on the same 20 held-out digits the quick head's
    accuracy ≥ TM's > 0.5; reference: teachable-mobilenet.ts:303-359, tfjs Adam.
    """
    _, _, features = digits
    split = teachable_split(features.labels)
    x, y = features.features[split.train], features.labels[split.train]
    start = fit_teachable_machine(x, y, 10, epochs=0)  # the VarianceScaling init (ts:303-327)
    (w1, b1), (w2, no_bias) = start.layers
    assert w1.shape == (100, x.shape[1]) and w2.shape == (10, 100) and no_bias is None and not b1.any()
    for w in (w1, w2):  # truncated normal, σ = √(1/fan_in), cut at 2σ
        sigma = math.sqrt(1 / w.shape[1])
        assert np.abs(w).max() <= 2 * sigma and 0.75 * sigma < w.std() < 1.0 * sigma
    generator = torch.Generator().manual_seed(0)  # the order fit_teachable_machine draws: two inits, then the shuffle
    for shape in (w1.shape, w2.shape):
        torch.nn.init.trunc_normal_(torch.empty(shape), generator=generator)
    order = torch.randperm(len(y), generator=generator).numpy()
    trained = fit_teachable_machine(x, y, 10, epochs=3)
    reference = _tfjs_reference(x, y, 10, w1, b1, w2, order, epochs=3)
    for ours, theirs in zip((trained.layers[0][0], trained.layers[0][1], trained.layers[1][0]), reference):
        np.testing.assert_allclose(ours, theirs, atol=2e-5)
    quick = fit_features(features, "quick")
    machine = fit_features(features, "teachable-machine")
    assert np.array_equal(quick.split.val, machine.split.val) and len(quick.split.val) == 20
    assert quick.val_accuracy >= machine.val_accuracy > 0.5, (quick.val_accuracy, machine.val_accuracy)


def test_a_refit_is_cancellable_and_reports_per_class_accuracy_from_its_confusion(digits):
    """A cancelled token stops the refit; per-class accuracy equals the held-out samples' argmax recomputed; the
    confusion counts every held-out sample; probabilities sum to 1; "record more of" names the class held out worst and
    what it is taken for (a made-up 3-class result: b, taken for c), a cell's paths are its samples.
    """
    _, _, features = digits
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        fit_features(features, "quick", cancel=cancel)
    result = fit_features(features, "quick")
    val = result.split.val
    for i, name in enumerate(result.classes):  # per class: its held-out samples predicted as it
        mine = val[features.labels[val] == i]
        assert result.per_class_accuracy()[name] == pytest.approx((result.probabilities[mine].argmax(1) == i).mean())
    assert result.confusion.sum() == len(val) == sum(result.held_out().values())
    matrix = result.confusion
    off = matrix - np.diag(np.diag(matrix))
    if off.any():  # the class held out worst, and what it is taken for most
        rates = [matrix[i, i] / matrix[i].sum() for i in range(len(matrix))]
        weakest = min(range(len(matrix)), key=lambda i: (rates[i], -off[i].sum()))
        assert result.record_next() == (result.classes[weakest], result.classes[off[weakest].argmax()])
    else:
        assert result.record_next() is None
    labels = np.array([0, 0, 1, 1, 1, 2, 2])  # class 1: one of three right, two taken for class 2
    predicted = np.array([0, 0, 2, 2, 1, 2, 0])
    made = TeachResult(("a", "b", "c"), tuple("pqrstuv"), labels, TeachSplit(np.zeros(0, int), np.arange(7)),
                       result.head, np.eye(3, dtype=np.float32)[predicted], 0.0)
    assert made.record_next() == ("b", "c") and made.cell_paths(1, 2) == ["r", "s"]
    np.testing.assert_allclose(result.probabilities.sum(1), 1, atol=1e-5)


def test_a_teach_project_is_a_dataset_the_other_tools_read_and_a_frame_added_twice_is_one_sample(digits, tmp_path):
    """Frames added twice are one file; labels.csv reads back as the folders; `scan_dataset(PROJECT)` (what finetune and
    the Training tab read) has the classes and files; it reopens the same; adding one sample embeds only it; on its
    non-square (40×24, 24×40) samples the preview's path gives the fitted probabilities (1e-5) and the plain-timm export
    agrees on all 4.
    """
    from vitstudio.core.data.datasets import scan_dataset
    from vitstudio.core.data.labels_file import read_labels_file

    loaded, _, _ = digits
    project = create_project(tmp_path / "p", ["cat", "dog"])
    red, blue = Image.new("RGB", (40, 24), (200, 0, 0)), Image.new("RGB", (24, 40), (0, 0, 200))
    project = add_images(project, "cat", [red, red, Image.new("RGB", (40, 24), (190, 10, 0))])
    project = add_images(project, "dog", [blue, Image.new("RGB", (24, 40), (10, 0, 190))])
    assert {c: len(s) for c, s in project.samples.items()} == {"cat": 2, "dog": 2}
    rows = read_labels_file(tmp_path / "p" / "labels.csv").labelled
    assert sorted((p, label) for p, label in rows) == sorted((p, c) for c, s in project.samples.items() for p in s)
    scan = scan_dataset(tmp_path / "p")  # what `vitstudio finetune PROJECT` and the Training tab train on
    assert scan.classes == ("cat", "dog") and sorted(scan.train["cat"]) == sorted(project.samples["cat"])
    reopened = open_project(tmp_path / "p")
    assert reopened.samples == project.samples and reopened.settings == project.settings
    first = drain(project_features(loaded, reopened))
    again = drain(project_features(loaded, add_images(reopened, "dog", [Image.new("RGB", (30, 30), (0, 90, 90))])))
    assert first.computed == 4 and again.computed == 1 and len(again.paths) == 5
    # non-square samples: the preview's path and plain timm's export see them as the cached features did
    result = fit_features(first)
    frames = [Image.open(p) for p in result.paths]
    np.testing.assert_allclose(image_probabilities(loaded, result.head, frames), result.probabilities, atol=1e-5)
    check = export_taught(loaded, result, tmp_path / "export", formats=("timm",)).checks[0]
    assert check.equal and check.samples == 4, check


def test_compare_names_the_sample_that_differs_and_how(digits):
    """An artefact whose top-1 moved on one sample and |Δp| = 1e-3 on another names exactly those two, with how; the
    unperturbed one is equal.
    """
    _, _, features = digits
    result = fit_features(features, "quick")
    paths, expected = list(result.paths[:5]), result.probabilities[:5].astype(np.float64)
    moved = expected.copy()
    moved[1] = np.roll(moved[1], 1)  # another top-1
    moved[3] += 1e-3 * np.array([1, -1] + [0] * 8)  # the same top-1, |Δp| 1e-3
    check = compare("test", "-", lambda batch: moved[[paths.index(p) for p in batch]], paths, expected)
    assert [p for p, _ in check.differing] == [paths[1], paths[3]] and not check.equal
    assert "top-1" in check.differing[0][1] and "|Δp| 1.00e-03" in check.differing[1][1]
    assert compare("test", "-", lambda batch: expected[[paths.index(p) for p in batch]], paths, expected).equal


@pytest.fixture(scope="module")
def cli_export(digits, tmp_path_factory):
    """(exit code, stdout, the folder) of `vitstudio teach PROJECT --export DIR --json` on 3 classes of the digits."""
    import contextlib
    import io
    import shutil

    _, project, _ = digits
    root = tmp_path_factory.mktemp("teach-cli")
    for name in ("3", "5", "8"):
        shutil.copytree(project.images / name, root / "project" / name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VITSTUDIO_CACHE_DIR", str(root / "cache"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["teach", str(root / "project"), "--model", str(bundled_demo()), "--export",
                         str(root / "out"), "--json", "--quiet"])
    return code, out.getvalue(), root


def test_teach_cli_fits_reports_and_exports_artefacts_that_predict_as_the_app(cli_export):
    """`teach PROJECT --export DIR --json` on 3 digit classes: exit 0, 24/6 split, per-class accuracy = the confusion's
    diagonal share, timm/ONNX/seed each run on all 30 samples with |Δp| ≤ 1e-4 and no difference; the run folder loads
    in plain timm here and predicts a 5 as 5; the class-folder tree gets no file.
    """
    import timm

    from vitstudio.core.data.images import read_image

    code, out, root = cli_export
    figures = json.loads(out)
    assert code == 0, figures
    assert figures["classes"] == ["3", "5", "8"] and figures["val"] == 6 and figures["train"] == 24
    confusion = np.asarray(figures["confusion"])
    assert figures["per_class_accuracy"] == {c: confusion[i, i] / confusion[i].sum() for i, c in
                                             enumerate(figures["classes"])}
    checks = {c["artefact"]: c for c in figures["export"]["checks"]}
    assert figures["export"]["equal"] and set(checks) == {"timm", "onnx", "seed"}
    assert all(c["samples"] == 30 and c["max_abs_diff"] <= 1e-4 and not c["differing"] for c in checks.values())
    assert json.loads((root / "out" / "check.json").read_text())["equal"]
    model = timm.create_model(f"local-dir:{root / 'out' / 'run'}", pretrained=True).eval()  # plain timm, here
    transform = timm.data.create_transform(**timm.data.resolve_model_data_config(model))
    sample = sorted((root / "project" / "5").iterdir())[0]
    with torch.no_grad():
        probs = model(transform(read_image(sample))[None]).softmax(-1)[0]
    assert probs.argmax() == 1 and not list((root / "project").glob("*.csv"))  # a class-folder tree is only read


@pytest.mark.parametrize(("case", "says"), [
    ("empty-class", "class b has no samples"), ("one-sample", "class b has one sample"),
    ("one-class", "teaching needs at least two"), ("not-a-folder", "is not a folder"),
    ("tm-export", "export with --recipe quick"), ("bad-settings", "is not valid JSON")])
def test_teach_cli_bad_input_is_one_line_and_writes_nothing(case, says, tmp_path, capsys):
    """A class with no samples, one sample, one class, no folder, the TM recipe with --export, a damaged settings.json:
    exit 2, one `error:` line saying which, nothing written. [parametrised ×6]
    """
    folder = tmp_path / "p"
    for name, n in {"a": 3, "b": {"empty-class": 0, "one-sample": 1}.get(case, 3)}.items():
        if case == "one-class" and name == "b":
            continue
        (folder / name).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (32, 32), (40 * i, 90, 9)).save(folder / name / f"{i}.png")
    if case == "bad-settings":
        (folder / "settings.json").write_text("{nope")
        (folder / "images").mkdir()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv = ["teach", str(folder / "missing" if case == "not-a-folder" else folder), "--export", str(tmp_path / "out"),
            *(["--recipe", "teachable-machine"] if case == "tm-export" else []), "--model", str(bundled_demo())]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_clip_style_model_starts_from_the_card_names_until_samples_take_over(tmp_path):
    """Classes from words: with no samples the refit gives the card names' zero-shot head, whose logits are OpenCLIP's
    own `build_zero_shot_classifier` ones (written here from its loading of the folder); two samples a class and the
    fitted head takes over, the zero-shot head's accuracy on its held-out samples beside it; a model without a text
    tower says what is missing.

    Classes from words: a tiny CLIP-style model (its own two prompt templates) on a project with no samples refits to
    the card names' zero-shot head, whose logits on a 48×32 frame equal OpenCLIP's `build_zero_shot_classifier` × logit
    scale on its own loading (1e-5; folder names as words); two samples a class and the quick head takes over, the
    zero-shot head's accuracy on its 3 held-out samples beside it (equal to the argmax of those logits on the samples,
    computed here); the demo (no text tower) says the class has no samples.
    """
    import open_clip

    from tests.core.test_openclip import CLIP_CFG, _build
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.teach.session import image_features, refit
    from vitstudio.core.teach.words import WordsHead

    folder = _build(CLIP_CFG, tmp_path / "tiny-clip", safetensors=True)
    templates = ["a photo of a {}.", "{}"]  # the model's own prompts (OpenCLIP's 80 cost seconds here)
    config = json.loads((folder / "open_clip_config.json").read_text())
    (folder / "open_clip_config.json").write_text(json.dumps(dict(config, zero_shot_templates=templates)))
    loaded = load_model(str(folder), device="cpu", precision="fp32")
    project = create_project(tmp_path / "p", ["red_square", "blue_disc", "green"])
    start = drain(refit(loaded, project))
    assert isinstance(start, WordsHead) and start.classes == project.classes and start.templates == tuple(templates)
    frame = Image.new("RGB", (48, 32), (200, 40, 30))
    clip = open_clip.create_model(f"local-dir:{folder}").eval()
    with torch.no_grad():
        classifier = open_clip.build_zero_shot_classifier(  # (D, C); the folder names as words
            clip, open_clip.get_tokenizer(f"local-dir:{folder}"), ["blue disc", "green", "red square"], templates,
            device="cpu")
        image = clip.encode_image(loaded.transform(frame)[None], normalize=True)
        reference = (clip.logit_scale.exp() * image @ classifier).numpy()
    np.testing.assert_allclose(start.logits(image_features(loaded, [frame])), reference, atol=1e-5, rtol=0)
    colours = {"red_square": (200, 40, 30), "blue_disc": (20, 40, 210), "green": (30, 200, 40)}
    rng = np.random.default_rng(0)  # two distinct samples each (two flat frames are near-copies: split together)
    for name, colour in colours.items():
        project = add_images(project, name, [Image.fromarray(np.clip(rng.normal(colour, 40, (32, 32, 3)), 0, 255)
                                                             .astype(np.uint8)) for _ in range(2)])
    fitted = drain(refit(loaded, project))
    assert isinstance(fitted, TeachResult) and fitted.head.recipe == "quick" and len(fitted.paths) == 6
    val = fitted.split.val  # the prior beside it: the names' zero-shot head on the same held-out samples
    logits = start.logits(image_features(loaded, [Image.open(fitted.paths[i]) for i in val]))
    assert len(val) == 3 and fitted.words_accuracy == np.mean(logits.argmax(1) == fitted.labels[val])
    demo = load_model(str(bundled_demo()), device="cpu", precision="fp32")
    with pytest.raises(ValueError, match="has no samples"):
        drain(refit(demo, create_project(tmp_path / "q", ["a", "b"])))


def test_the_preview_frame_has_the_heads_bars_and_the_registrys_map_drawn_over_what_the_model_sees(digits):
    """The live preview: the head's probabilities most likely first (as image_probabilities), the Attention tab's
    rollout through the registry (`explain`) only when asked, drawn inside the model's crop of a non-square frame and
    nowhere else (the caption bar below aside).

    The live preview's frame (a digit in a 64×40 frame): the head's probabilities most likely first, equal to
    `image_probabilities` (1e-6); with rollout the map is the registry's (`explain`, 1e-6), none unless asked; the
    annotated picture differs from the map-less one only inside the model's centre crop (columns checked), the caption
    bar aside; no head, no labels.
    """
    from vitstudio.core.analysis.explain import explain
    from vitstudio.core.play.frames import CAPTION, annotate
    from vitstudio.core.teach.preview import preview_frame

    loaded, project, features = digits
    result = fit_features(features)
    digit = Image.open(project.samples["4"][0]).convert("RGB")
    frame = np.full((40, 64, 3), 255, np.uint8)
    frame[4:36, 16:48] = np.asarray(digit)  # a 4 in the middle of a wide frame
    plain = preview_frame(loaded, (result.classes, result.head), frame)
    mapped = preview_frame(loaded, (result.classes, result.head), frame, method="rollout")
    expected = image_probabilities(loaded, result.head, [Image.fromarray(frame)])[0]
    order = np.argsort(-expected)
    assert plain.labels == mapped.labels == tuple(result.classes[i] for i in order) and plain.map is None
    np.testing.assert_allclose(mapped.probs, expected[order], atol=1e-6)
    np.testing.assert_allclose(mapped.map, explain(loaded, "rollout", Image.fromarray(frame)).array, atol=1e-6)
    assert preview_frame(loaded, None, frame).labels == ()
    top, left, h, w = mapped.box
    assert h == w <= 40 and abs(left - (64 - w) / 2) <= 1 and abs(top - (40 - h) / 2) <= 1  # a centre crop, square
    with_map, without = annotate(mapped, 12.0, frame=frame), annotate(plain, 12.0, frame=frame)
    scale = with_map.shape[1] / frame.shape[1]
    differs = np.any(with_map[:-CAPTION] != without[:-CAPTION], axis=(0, 2))  # which columns the map touched
    columns = np.flatnonzero(differs)
    assert columns.min() >= round(left * scale) and columns.max() < round((left + w) * scale) and len(columns) > 0


def test_augmentation_is_off_by_default_and_fits_on_views_of_the_training_samples(digits, monkeypatch):
    """The head is fitted on the training samples' own features unless the project asks for augmentation; then also on
    two views of each: with every view flipped and uncropped, each equals the mirrored sample's features computed here
    through the eval path (PIL's mirror), and the head moves; with the real crop and flip most views differ from their
    sample. Validation is never augmented.

    By default the head is fitted on exactly the training samples' features; with the project's augment setting on, also
    on two views of each (labels repeated, validation split unchanged): with every view flipped and uncropped each
    equals the PIL-mirrored sample's features through the eval path (1e-5) and the head moves; with the real crop
    (0.5–1) and flip most views differ from their sample.
    """
    from dataclasses import replace

    from PIL import ImageOps

    from vitstudio.core.teach import augment, heads
    from vitstudio.core.teach.session import fit_project, image_features

    loaded, project, features = digits
    fitted, quick = [], heads.FITTERS["quick"]
    monkeypatch.setitem(heads.FITTERS, "quick", lambda x, y, n, cancel=None: fitted.append((x, y)) or
                        quick(x, y, n, cancel))
    plain = fit_project(loaded, project, features)
    train, labels = plain.split.train, features.labels
    assert project.settings.augment is False and np.array_equal(fitted[-1][0], features.features[train])
    on = replace(project, settings=replace(project.settings, augment=True))
    view = augment.VIEW
    monkeypatch.setattr(augment, "VIEW", dict(scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=1.0))
    flipped = fit_project(loaded, on, features)
    x, y = fitted[-1]
    n = len(train)
    assert x.shape == (3 * n, features.features.shape[1]) and np.array_equal(flipped.split.val, plain.split.val)
    assert np.array_equal(y, np.concatenate([labels[train], np.repeat(labels[train], 2)]))
    np.testing.assert_array_equal(x[:n], features.features[train])
    mirrored = image_features(loaded, [ImageOps.mirror(Image.open(features.paths[i]).convert("RGB"))
                                       for i in train[:4]])
    np.testing.assert_allclose(x[n:n + 8].reshape(4, 2, -1), np.stack([mirrored, mirrored], 1), atol=1e-5)
    assert not np.allclose(flipped.head.layers[0][0], plain.head.layers[0][0])
    monkeypatch.setattr(augment, "VIEW", view)  # the real crop and flip: most views differ from their sample
    views = augment.augmented_features(loaded, list(features.paths[:10])).reshape(10, 2, -1)
    assert (np.abs(views - features.features[:10, None]).max(-1) > 1e-3).mean() > 0.8


def test_teach_cli_uses_the_model_the_project_records_and_says_which(digits, tmp_path, capsys):
    """`vitstudio teach PROJECT` teaches with the model the project was taught with (settings.json's model and
    weights), not the digits demo, and says which model it uses and why in one line: recorded in the project,
    --model, or none recorded (the bundled demo)."""
    import shutil
    from dataclasses import replace

    from vitstudio.core.teach.project import create_project, save_settings

    _, project, _ = digits
    root = tmp_path / "p"
    made = create_project(root, ["3", "5"])
    for name in ("3", "5"):
        for path in project.samples[name][:4]:
            shutil.copy(path, root / "images" / name / path.name)
    spec = "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=10"
    torch.manual_seed(0)
    weights = tmp_path / "w.pth"  # a model the project was taught with: a tiny ViT and its own weights file
    from vitstudio.core.models.loading import load_model

    torch.save(load_model(spec, device="cpu").model.state_dict(), weights)
    save_settings(root, replace(made.settings, model=spec, weights=str(weights)))
    cpu = ["--device", "cpu", "--precision", "fp32", "--quiet", "--json"]
    capsys.readouterr()
    assert main(["teach", str(root), *cpu]) == 0
    out, err = capsys.readouterr()
    figures = json.loads(out)
    assert figures["model"] == spec and figures["model_from"] == "recorded in the project"
    assert [line for line in err.splitlines() if line.startswith("model: ")] == [
        f"model: {spec} with weights {weights} (recorded in the project)"]
    assert main(["teach", str(root), "--model", str(bundled_demo()), *cpu]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["model_from"] == "--model" and "model: Digits demo (bundled) (--model)" in err
    save_settings(root, made.settings)  # nothing recorded: the demo, and it says so
    assert main(["teach", str(root), *cpu]) == 0
    out, err = capsys.readouterr()
    assert "model: Digits demo (bundled) (no model recorded: the bundled demo)" in err


def test_a_teach_export_carries_an_ood_bank_and_predict_gives_a_verdict(cli_export, tmp_path, capsys):
    """The export's run/ and seed/ folders carry the out-of-distribution bank a fine-tuned run carries (the same file
    in both, named in check.json): `vitstudio predict --model EXPORT/run` then gives a calibrated verdict, not the
    uncalibrated 1 − top-probability, on a taught sample and on an image of no taught class."""
    from vitstudio.core.models.ood import BANK_FILE, read_bank

    code, out, root = cli_export
    export = json.loads(out)["export"]
    run, seed = root / "out" / "run", root / "out" / "seed"
    assert export["ood_bank"] == [str(run / BANK_FILE), str(seed / BANK_FILE)] and export["no_ood_bank"] is None
    bank = read_bank(run)
    assert bank is not None and (seed / BANK_FILE).read_bytes() == (run / BANK_FILE).read_bytes()
    assert len(bank.features) == 24 and bank.separation  # the training share; the score's AUROCs measured
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), np.uint8)).save(noise)
    sample = sorted((root / "project" / "5").iterdir())[0]
    capsys.readouterr()
    main(["predict", str(sample), str(noise), "--model", str(run), "--json", "--device", "cpu", "--precision", "fp32"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["top"][0]["label"], r["ood_calibrated"], r["ood_verdict"]) for r in rows] == [
        ("5", True, "like"), ("8", True, "unlike")], rows  # the noise is "8 97.9 %" by the head alone


def _recorded_project(digits, root, recordings=20, frames=6):
    """A Teach project of `recordings` holds, each `frames` frames of one digit image a few milliseconds apart (pixel
    noise of ±2), the holds given to classes a and b at random: nothing but the recording tells a from b."""
    from vitstudio.app.teach_state import TeachModel

    _, project, _ = digits
    images = [np.asarray(Image.open(project.samples[c][k]).convert("RGB"), np.int16) for k in range(2)
              for c in project.classes][:recordings]  # 20 distinct digits, two of each
    rng = np.random.default_rng(0)
    teach = TeachModel()
    teach.open(root)
    for name in ("a", "b"):
        teach.add_class(name)
    for k, image in enumerate(images):
        teach.hold("ab"[k % 2] if k < 4 else "ab"[int(rng.integers(0, 2))])
        for i in range(frames):
            teach.offer(i / 24, np.clip(image + rng.integers(-2, 3, image.shape), 0, 255).astype(np.uint8))
        assert teach.release() == frames
    return teach.project


def test_frames_of_one_recording_stay_on_one_side_and_no_longer_inflate_validation(digits, tmp_path):
    """Frames held to record are split by recording: the frames of one hold are all in training or all held out,
    from recordings.json and, without it (frames added as files), from the near-duplicate groups alone. Split frame
    by frame, every held-out frame has a near-identical twin in training and validation scores the recording, not
    the head: on 20 holds of 6 frames given to two classes at random, 97 % frame by frame vs 54 % (chance) by
    recording, over three split seeds."""
    from dataclasses import replace
    from pathlib import Path

    from vitstudio.core.teach.project import RECORDINGS, recordings

    loaded = digits[0]
    project = _recorded_project(digits, tmp_path / "p")
    hold_of = recordings(project.root)
    features = drain(project_features(loaded, project))
    holds = np.asarray([hold_of[Path(p).name] for p in features.paths])
    assert len(set(holds)) == 20
    result = fit_features(features)
    val = np.zeros(len(holds), bool)
    val[result.split.val] = True
    assert all(len(set(val[holds == h])) == 1 for h in set(holds))  # never on both sides
    assert val.any() and (~val).any()
    by_frame = fit_features(replace(features, groups=None))  # the split before: frame by frame
    frame_val = np.zeros(len(holds), bool)
    frame_val[by_frame.split.val] = True
    assert any(len(set(frame_val[holds == h])) == 2 for h in set(holds))
    honest = [fit_features(features, seed=s).val_accuracy for s in range(3)]
    inflated = [fit_features(replace(features, groups=None), seed=s).val_accuracy for s in range(3)]
    assert np.mean(inflated) >= 0.9 and np.mean(honest) <= 0.7, (inflated, honest)
    (project.root / RECORDINGS).unlink()  # the same frames, no record of their holds: the near-copies alone
    alone = drain(project_features(loaded, open_project(project.root)))
    assert [len(set(alone.groups[holds == h])) for h in sorted(set(holds))] == [1] * 20


def test_validation_says_when_it_holds_too_few_samples_to_mean_anything(digits, capsys):
    """A class with fewer than 5 held-out samples (2 of 7: its accuracy can only be 0, 50 or 100 %), or none (every
    sample one recording), is named in one line: the result's validation_note, `teach`'s report and --json; a class
    with nothing held out has no accuracy (None, "—"), not 0 %."""
    from vitstudio.core.teach.session import TeachFeatures

    x = np.random.default_rng(0).normal(0, 1, (14 + 12, 8)).astype(np.float32)
    labels = np.asarray([0] * 7 + [1] * 7 + [2] * 12)
    groups = np.concatenate([np.arange(14), np.full(12, 99)])  # class c: one recording
    result = fit_features(TeachFeatures(("a", "b", "c"), tuple(f"{i}.png" for i in range(26)), labels, x,
                                        groups=groups))
    assert result.held_out() == {"a": 2, "b": 2, "c": 0}
    assert result.per_class_accuracy()["c"] is None
    note = result.validation_note()
    assert "nothing of c could be held out" in note and "validation holds 2 of a, 2 of b: too few" in note
    assert "\n" not in note
    many = fit_features(TeachFeatures(("a", "b"), tuple(f"{i}.png" for i in range(80)), np.repeat([0, 1], 40),
                                      np.random.default_rng(1).normal(0, 1, (80, 8)).astype(np.float32)))
    assert many.held_out() == {"a": 6, "b": 6} and many.validation_note() == ""
