"""Concepts (core/concepts): a planted mark gets its concept, the SAE is the published TopK SAE (and overcomplete's),
the intervention is exact with nothing switched off, a cancelled run resumes to the same weights."""

from __future__ import annotations

import importlib.util
import sys
import types

import numpy as np
import pytest
import torch
from PIL import Image

from tests.conftest import make_tiny_vit
from tests.core.generators import drain
from tests.core.planted_concepts import fine_tuned, planted_folder
from vitstudio.core.concepts.settings import ConceptSettings
from vitstudio.core.jobs import CancelToken

SETTINGS = ConceptSettings(size=64, k=4, epochs=12, tokens_per_step=256, seed=0)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """(loaded model fine-tuned on marked vs plain, {path: mark}, the LearnResult of its concepts)."""
    from vitstudio.core.concepts.learn import learn_concepts
    from vitstudio.core.models.loading import loaded_module

    root = tmp_path_factory.mktemp("planted")
    marks = planted_folder(root / "images")
    loaded = loaded_module(make_tiny_vit(num_classes=2), "planted-vit")
    assert fine_tuned(loaded, marks) > 0.95  # the model tells marked from plain
    result = drain(learn_concepts(loaded, [str(root / "images")], SETTINGS, root / "concepts"))
    return loaded, marks, result


def _image_max(loaded, concepts, paths):
    from vitstudio.core.concepts.maps import concept_maps

    return np.stack([concept_maps(loaded, concepts, loaded.to_tensor(loaded.crop(Image.open(p).convert("RGB")))[None])
                     .max((0, 1)) for p in paths])


def test_planted_mark_gets_a_concept_that_finds_it_and_drives_the_prediction(planted):
    """Digits with a magenta one-patch mark on half (planted_concepts.py), a tiny ViT fine-tuned to tell them apart,
    concepts learned (64, k 4): the concept chosen on one half separates marked from plain on the other by its
    image-level maximum (AUROC ≥ 0.95, scikit-learn), its map's top patches fall on the mark (IoU ≥ 0.5), switching it
    off lowers the marked-over-plain logit margin on > 90 % of the marked images and by > 10 % on average; with nothing
    switched off the rewritten forward equals the model's (1e-5); the concept's statistics (images, class means, top
    images) point at the marked folder.
    """
    from sklearn.metrics import roc_auc_score

    from vitstudio.core.analysis.explain import explain
    from vitstudio.core.concepts.intervene import logits_with

    loaded, marks, result = planted
    paths = list(marks)
    marked = np.asarray([marks[p] is not None for p in paths])
    strongest = _image_max(loaded, result.concepts, paths)
    pick, held = np.arange(0, len(paths), 2), np.arange(1, len(paths), 2)  # chosen on one half, judged on the other
    pick, held = np.r_[pick[:60], held[:60]], np.r_[pick[60:], held[60:]]
    aucs = [roc_auc_score(marked[pick], strongest[pick, c]) if strongest[pick, c].any() else 0.5
            for c in range(result.concepts.size)]
    concept = int(np.argmax(aucs))
    assert roc_auc_score(marked[held], strongest[held, concept]) >= 0.95
    ious = []
    for i in held[marked[held]]:
        e = explain(loaded, "concept", Image.open(paths[i]).convert("RGB"), concepts=str(result.path),
                    concept=concept)
        top = set(zip(*np.nonzero(e.array >= 0.5 * e.array.max()))) if e.array.max() > 0 else set()
        ious.append(len(top & {marks[paths[i]]}) / len(top | {marks[paths[i]]}))
    assert np.mean(ious) >= 0.5, ious
    x = torch.stack([loaded.to_tensor(loaded.crop(Image.open(paths[i]).convert("RGB"))) for i in held[marked[held]]])
    before, after = logits_with(loaded, result.concepts, x), logits_with(loaded, result.concepts, x, {concept: 0.0})
    margin_before, margin_after = before[:, 0] - before[:, 1], after[:, 0] - after[:, 1]  # "marked" over "plain"
    assert (margin_after < margin_before).mean() > 0.9 and margin_after.mean() < 0.9 * margin_before.mean()
    p_before = torch.softmax(torch.from_numpy(before), 1)[:, 0]
    with torch.no_grad():  # nothing switched off: the rewrite (reconstruction + the SAE's error) is the model
        np.testing.assert_allclose(p_before.numpy(), torch.softmax(loaded.model(x), 1)[:, 0].numpy(), atol=1e-5)
        np.testing.assert_allclose(logits_with(loaded, result.concepts, x), loaded.model(x).numpy(), atol=1e-5)
    row = result.concepts.stats["concepts"][concept]  # the browser's statistics of it
    assert row["images"] >= 0.4 * marked.sum() and result.concepts.stats["classes"] == ["marked", "plain"]
    assert row["class_means"][0] > 3 * row["class_means"][1]
    assert sum(marks[t["path"]] is not None for t in row["top_images"]) >= 10


def _overcomplete():
    """overcomplete's TopKSAE without running its package __init__ (0.3.0's calls matplotlib.cm.get_cmap, removed in
    matplotlib 3.9; see core/concepts/sae.py)."""
    spec = importlib.util.find_spec("overcomplete")
    if spec is None:
        return None
    if "overcomplete" not in sys.modules:
        package = types.ModuleType("overcomplete")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["overcomplete"] = package
    from overcomplete.sae import TopKSAE

    return TopKSAE


def test_sae_is_the_published_topk_and_loads_in_overcomplete(planted):
    """The SAE's codes and reconstruction equal z = TopK(ReLU(Wx + b)), x̂ = zD written in numpy (1e-5), unit dictionary
    rows; overcomplete's `TopKSAE(encoder_module="linear")` loads FILE.safetensors and gives the same codes and
    reconstruction (1e-6).
    """
    from safetensors.torch import load_file

    _, _, result = planted
    concepts = result.concepts
    tokens = result.tokens.of_images(np.arange(20)).reshape(-1, result.tokens.width)
    x = concepts.norm.apply(torch.from_numpy(tokens))
    with torch.no_grad():
        z, x_hat = concepts.sae(x)
    # the formula, in numpy: z = TopK(ReLU(W x + b)), x̂ = z D with unit rows of D
    w, b, d = (t.detach().double().numpy() for t in (concepts.sae.encoder.weight, concepts.sae.encoder.bias,
                                                       concepts.sae.dictionary))
    pre = np.maximum(x.double().numpy() @ w.T + b, 0)
    kth = np.sort(pre, 1)[:, -SETTINGS.k][:, None]
    z_ref = np.where(pre >= kth, pre, 0)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(z.numpy(), z_ref, atol=1e-5)
    np.testing.assert_allclose(x_hat.numpy(), z_ref @ d, atol=1e-5)
    library = _overcomplete()
    if library is None:
        pytest.skip("overcomplete is not installed (make installs it without its dependencies)")
    sae = library(concepts.sae.width, concepts.size, top_k=concepts.sae.k, encoder_module="linear")
    sae.load_state_dict(load_file(str(result.path)))
    sae.eval()
    with torch.no_grad():
        _, z_lib, x_lib = sae(x)
    np.testing.assert_allclose(z_lib.numpy(), z.numpy(), atol=1e-6)
    np.testing.assert_allclose(x_lib.numpy(), x_hat.numpy(), atol=1e-6)


def test_cancelled_training_resumes_to_the_same_concepts(planted, tmp_path):
    """A run cancelled after 5 steps keeps FILE.partial; the same settings resume at step 5 and end at the uninterrupted
    run's weights (1e-6); another seed starts afresh.
    """
    from vitstudio.core.concepts.training import SAEProgress, checkpoint_path, train_sae

    _, _, result = planted
    settings = ConceptSettings(size=32, k=4, epochs=3, tokens_per_step=256, seed=3, aux_k=8)  # AuxK on: its path too
    whole = drain(train_sae(result.tokens, settings, tmp_path / "a"))
    cancel, seen = CancelToken(), 0
    gen = train_sae(result.tokens, settings, tmp_path / "b", cancel)
    for progress in gen:
        seen += isinstance(progress, SAEProgress)
        if seen == 5:
            cancel.cancel()
    assert checkpoint_path(tmp_path / "b").is_file()
    resumed = drain(train_sae(result.tokens, settings, tmp_path / "b"))
    assert resumed.resumed_from == 5 and resumed.steps == whole.steps and not resumed.cancelled
    for a, b in zip(whole.sae.state_dict().values(), resumed.sae.state_dict().values()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    other = drain(train_sae(result.tokens, ConceptSettings(size=32, k=4, epochs=3, tokens_per_step=256, seed=4,
                                                           aux_k=8), tmp_path / "b"))
    assert other.resumed_from == 0  # another seed never picks up this checkpoint


def test_two_processes_learn_the_concepts_one_does(tmp_path, forked_cli):
    """`torchrun --nproc-per-node 2 -m vitstudio concepts` (gloo on the CPU, forked with torchrun's environment):
    the ranks share the images while collecting tokens, rank 0 trains; the same seed gives one process's concepts.

    [subprocess]
    """
    import os
    import shutil

    from safetensors.torch import load_file

    from vitstudio.cli import main
    from vitstudio.core.models.demo import bundled_demo, render_digits

    data = render_digits(tmp_path / "digits", per_class=3)
    args = ["concepts", str(data), "--model", str(bundled_demo()), "--size", "16", "--k", "2", "--epochs", "2",
            "--quiet"]
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    shutil.rmtree(os.environ["VITSTUDIO_CACHE_DIR"])  # the two processes start from an empty token cache
    ranks = forked_cli.run_ranks([*args, "--out", str(tmp_path / "two")], 2, {**os.environ, "OMP_NUM_THREADS": "1"})
    assert [r.returncode for r in ranks] == [0, 0], ranks[0].stderr[-2000:] + ranks[1].stderr[-2000:]
    assert not (tmp_path / "two.partial").exists()
    one, two = load_file(str(tmp_path / "one.safetensors")), load_file(str(tmp_path / "two.safetensors"))
    for name in one:
        torch.testing.assert_close(one[name], two[name], rtol=0, atol=1e-5)


def test_bad_inputs_are_one_line_and_nothing_is_written(tiny_weights, tmp_path, capsys):
    """An empty or missing folder, a file that is not a concepts file, concepts of another model, a concept that
    does not exist, --ablate without --concepts: exit 2 with one line each, and no concepts file is written.

    An empty or missing folder, k above the size, a file that is not a concepts file, concepts of another model's
    weights, a concept that does not exist (predict --ablate, explain --concept), --ablate without --concepts: exit 2
    with one line naming the problem; no file written.
    """
    from tests.conftest import TINY_SPEC, make_tiny_vit
    from vitstudio.cli import main

    weights, _ = tiny_weights
    model = ["--model", TINY_SPEC, "--weights", str(weights)]
    (tmp_path / "empty").mkdir()
    image = tmp_path / "one" / "a.png"
    image.parent.mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(image)
    (tmp_path / "bad.safetensors").write_bytes(b"junk")
    (tmp_path / "bad.json").write_text("{}")
    assert main(["concepts", str(image.parent), *model, "--size", "4", "--k", "2", "--epochs", "1", "--out",
                 str(tmp_path / "good"), "--quiet"]) == 0
    from safetensors.torch import save_file

    other = tmp_path / "other.safetensors"
    save_file(make_tiny_vit(seed=1).state_dict(), str(other))
    capsys.readouterr()
    cases = {
        ("concepts", str(tmp_path / "empty"), *model, "--out", str(tmp_path / "x")): "No images in",
        ("concepts", str(tmp_path / "nope"), *model, "--out", str(tmp_path / "x")): "no such file or folder",
        ("concepts", str(image.parent), *model, "--k", "9", "--size", "4", "--out", str(tmp_path / "x")): "k (9",
        ("predict", str(image), *model, "--concepts", str(tmp_path / "bad")): "not a concepts file",
        ("predict", str(image), "--model", TINY_SPEC, "--weights", str(other), "--concepts",
         str(tmp_path / "good")): "was learned on the tokens of",
        ("predict", str(image), *model, "--concepts", str(tmp_path / "good"), "--ablate", "7"): "Concept 7 does not",
        ("predict", str(image), *model, "--ablate", "1"): "go with --concepts",
        ("explain", str(image), *model, "--method", "concept", "--concepts", str(tmp_path / "good"), "--concept",
         "4", "--out", str(tmp_path / "m.npy")): "Concept 4 does not",
    }
    for args, says in cases.items():
        assert main([*args, "--quiet"] if args[0] != "explain" else list(args)) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], (args, err)
    assert not list(tmp_path.glob("x*")) and not (tmp_path / "m.npy").exists()


def test_concepts_that_reconstruct_poorly_say_so_with_what_to_change(capsys, monkeypatch):
    """The walk: the defaults (4,096 concepts, 32 active) on 300 digits through a 64-wide model ended at R² −1.85
    and were browsed as if they meant something. Below R² 0.5 one line says so, with what to change; the CLI prints
    it as a warning after its summary.

    Below R² 0.5 one line says the concepts reconstruct the tokens poorly, with steps, tokens and a smaller size to try;
    the CLI prints it as a warning after its summary (the walk: defaults on 300 digits ended at R² −1.85, browsed as if
    meaningful); the size it suggests fits the token count (512 and k 32 for 19,200 tokens: 32 tokens a concept).
    """
    from types import SimpleNamespace

    from vitstudio.cli import concepts as cli_concepts
    from vitstudio.core.concepts.learn import poor_fit_warning

    def made(r2):
        return SimpleNamespace(size=4096, sae=SimpleNamespace(k=32), meta={
            "training": {"r2": r2, "steps": 50}, "data": {"tokens": 19200}})

    assert poor_fit_warning(made(0.93)) == "" and poor_fit_warning(made(0.5)) == ""
    said = poor_fit_warning(made(-1.85))
    assert said == ("These 4,096 concepts reconstruct the tokens poorly (R² -1.85 after 50 steps on 19,200 tokens): "
                    "their maps and top patches say little. Learn again with fewer concepts (e.g. 512, 32 active per "
                    "patch), more epochs or more images.")  # 19,200 tokens / 32 per concept: 2⁹ ≤ 600
    result = SimpleNamespace(tokens=SimpleNamespace(errors=[], paths=["a"] * 300, computed=300, patches=64),
                             training=SimpleNamespace(r2=-1.85, l0=32.0, dead=0, resumed_from=0),
                             path="/tmp/c.safetensors", concepts=SimpleNamespace(layer=2, **vars(made(-1.85))))
    assert cli_concepts._report(SimpleNamespace(json=False), result) == 0
    assert f"warning: {said}" in capsys.readouterr().err


def test_a_run_resumed_after_its_last_step_reports_the_figures_it_ended_with(tmp_path):
    """A kill after the last epoch's checkpoint and before the concepts file leaves a checkpoint at the last step;
    the rerun has no step left to take. It reports the R², L0 and dead count of the run it resumes (the epoch's
    sums are part of the checkpoint), never R² NaN from sums of nothing."""
    from vitstudio.core.concepts.tokens import FolderTokens
    from vitstudio.core.concepts.training import checkpoint_path, train_sae

    rows = np.random.default_rng(0).standard_normal((12, 4 * 8)).astype(np.float16)  # 12 images, 4 patches, d 8
    tokens = FolderTokens(tuple(f"{i}.png" for i in range(12)), np.arange(12), rows, (2, 2), 8, (), 12, "t")
    settings = ConceptSettings(size=8, k=2, epochs=2, tokens_per_step=16, seed=0)
    whole = drain(train_sae(tokens, settings, tmp_path / "c"))
    assert checkpoint_path(tmp_path / "c").is_file() and np.isfinite(whole.r2)
    again = drain(train_sae(tokens, settings, tmp_path / "c"))
    assert again.resumed_from == whole.steps == again.steps
    assert (again.r2, again.l0, again.dead) == (whole.r2, whole.l0, whole.dead)
