"""The seam matrix (issue 18): every family × every source it comes in × every operation, through the CLI entry as
the user meets it. A cell either works — and what it computed equals the source's own forward on the same
preprocessed tensor — or refuses with ONE line (exit 2, no traceback). Rows: tests/core/seam_rows.py (a timm
folder saved at a non-default image size per timm family, transformers folders, seed checkpoints ± pre_logits,
`custom:`, and the run folder fine- tuning each of them produces). Columns: load, card, predict, every registered
analysis, embed, CKA of every block against itself (compare-layers, base rows), fine-tune (one step, reloaded from
the run folder), LoRA (the lora preset's memory plan through the CLI, and its adapters merged exactly, or the one-line
reason the family cannot take them; base rows), ONNX export, seed export (loaded by upstream's constructor) and its
reload in ViT Studio. The analyses are two operation groups, one CLI call each: `explain-each` (every analysis that
applies at its own defaults; each one that does not, alone, refused with the registry's reason) and `explain-all`
(every one at the first layer). 25 base rows × 12 + 25 run rows × 8 = 500 cells.

This module holds the base rows' cells but training's; what training makes of each row — the fine-tune and LoRA
columns and the run rows — is tests/core/test_seam_matrix_runs.py's (its cells' code is here), so that the two
halves run on two workers (`--dist loadfile`); each module builds the base rows it reads.

The CLI runs in-process (`vitstudio.cli.main`) with stdout/stderr redirected (and file descriptor 2, where C++
code writes) rather than through capsys, because a row's run folder is made once per module and shared by the
cells of its `run:` row. `--junitxml` with `-o junit_family=legacy` records each named refusal as a `refused`
property."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import sys
import tempfile
import traceback
import weakref
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.core.generators import drain
from tests.core.seam_dense import dense_cell
from tests.core.seam_rows import BASE_ROWS, Sources, one_parser  # noqa: F401 - a fixture
from tests.core.seam_scores import SCORES_ROWS, scores_cell
from tests.core.seam_teach import teach_cell
from tests.core.seam_view_export import VIEW_EXPORT_ROWS, view_export_cell
from vitstudio.cli import main
from vitstudio.core.analysis import registry
from vitstudio.core.analysis.applicability import why_not
from vitstudio.core.data.images import read_image
from vitstudio.core.inference import forward_logits
from vitstudio.core.models import zeroshot
from vitstudio.core.models.loading import ModelLoadError, load_model

OPS = ("load", "card", "predict", "explain-each", "explain-all", "embed", "compare-layers", "finetune", "lora",
       "concepts", "dense", "export-onnx", "export-seed", "seed-reload", "teach", "scores", "view-export",
       "registers")
RUN_ROWS = tuple(f"run:{r}" for r in BASE_ROWS)
TRAINING_OPS = ("finetune", "lora")  # with the run rows: tests/core/test_seam_matrix_runs.py
# teach's column: the ways a family's logits meet its pooled features (a plain Linear, a seed pre-logits layer; a
# distilled model's two heads and Swin's pooling head, refused): the other rows repeat one of them
TEACH_ROWS = ("vit", "seed-prelogits", "deit-distilled", "swin")

# Cells known to fail (issue 18: what the matrix found and nobody has fixed yet); strict, so each flips to a failure
# once fixed and its mark can go.
KNOWN: dict[tuple[str, str], str] = {}  # (row, operation) -> reason, for a cell marked xfail(strict=True)
REFUSALS: list[str] = []  # the named refusals met, for the summary line
pytestmark = pytest.mark.usefixtures("one_parser")


def cli(args: list[str]) -> tuple[object, str, str]:
    """(exit code, stdout, stderr) of `vitstudio ARGS` run in-process; an exception escaping main() is what the user
    would see as a traceback: its code is 'traceback' and stderr holds it."""
    out, err = io.StringIO(), io.StringIO()
    native = tempfile.TemporaryFile()  # what C++ writes to file descriptor 2 (the tracer's graph dumps) is seen too
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(native.fileno(), 2)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:
                code = exc.code
            except Exception:  # noqa: BLE001 - the cell reports it
                code = "traceback"
                traceback.print_exc(file=err)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    with native:
        native.seek(0)
        return code, out.getvalue(), err.getvalue() + native.read().decode(errors="replace")


def assert_works_or_refuses(code, out: str, err: str, may_refuse: bool = True) -> bool:
    """True when the command worked (exit 0); a refusal must be exit 2 with one line and no traceback, and is a
    failure where the README promises the operation (`may_refuse=False`)."""
    assert "Traceback" not in out + err, err[-3000:]
    if code == 0:
        return True
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err[-3000:])
    assert may_refuse, f"refused where the README promises it: {lines[0]}"
    REFUSALS.append(lines[0])
    return False


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    # one torch thread, as in the whole suite (tests/conftest.py)
    return Sources(tmp_path_factory.mktemp("seam"))


def _cells(training: bool):
    """The cells of one module: training's (TRAINING_OPS and the run rows) or all the others."""
    for row in (*BASE_ROWS, *RUN_ROWS):
        for op in OPS:
            if (row.startswith("run:") or op in TRAINING_OPS) != training:
                continue
            if row.startswith("run:") and op in ("finetune", "compare-layers", "lora", "concepts", "dense", "teach",
                                                 "registers"):
                continue  # fine-tuning a run, or reading its layers, is its timm folder's: the base rows cover it
            if (op == "teach" and row not in TEACH_ROWS) or (op == "scores" and row not in SCORES_ROWS):
                continue
            if op == "view-export" and row not in VIEW_EXPORT_ROWS:  # the dense column covers each family's masks
                continue
            if row.startswith("run:") and op == "explain-each":
                continue  # a run's analyses: its explain-all cell runs every one that applies (each equal to
                # explain()); the refusals and default parameters per method are the base row's (same architecture)
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN[row, op])] if (row, op) in KNOWN else []
            yield pytest.param(row, op, id=f"{row}|{op}", marks=marks)


@lru_cache(maxsize=4)
def _image(photo):
    """The photo as read_image decodes it, once: the references of every cell read the same file (~8 ms a decode;
    the CLI still reads it itself in every call)."""
    return read_image(photo)


_TENSORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # LoadedModel -> {photo: its input tensor}


def _x(loaded, photo):
    """(1, 3, H, W): the photo through `loaded`'s own crop and normalisation, made once per model and photo (the
    cells of a row share its model; a reloaded model has its own entry)."""
    made = _TENSORS.setdefault(loaded, {})
    if str(photo) not in made:
        made[str(photo)] = loaded.to_tensor(loaded.crop(_image(photo)))[None]
    return made[str(photo)]


_EXPLAINED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # LoadedModel -> {(method, params): array}


def _explained(loaded, method: str, image, **given) -> np.ndarray:
    """explain(loaded, method, image, **given).array, computed once per model, method and resolved parameters: the
    explain-all cell's reference of a method without a layer or patch is the explain-each cell's, on the same
    photo (the model is only read between them)."""
    from vitstudio.core.analysis.explain import explain, validate

    key = (method, repr(sorted(validate(loaded, method, **given).items())))
    made = _EXPLAINED.setdefault(loaded, {})
    if key not in made:
        made[key] = explain(loaded, method, image, **given).array
    return made[key]


def _loaded(source):
    """The source as ViT Studio loads it, once per row (the cells only read it)."""
    if "loaded" not in source.notes:
        source.notes["loaded"] = load_model(source.spec, source.weights, "cpu", "fp32")
    return source.notes["loaded"]


@pytest.mark.parametrize(("row", "op"), list(_cells(training=False)))
def test_cell(row, op, sources, photos, tmp_path, record_property):
    """Each (base row, op) works and equals the source's own forward (timm / transformers / upstream vit_model.py port),
    or refuses in one line (exit 2); ops: load, card, predict, explain-each, explain-all, embed, compare-layers (CKA of
    the row against itself on four photos, diagonal 1, a cell equal to Kornblith's formula on the cached blocks),
    concepts (`vitstudio concepts` on four photos, then `explain --method concept` equal to explain(), 1e-6, and
    `predict --concepts FILE` equal to the source's own forward, 1e-5; Swin's one-line refusal), ONNX, seed export +
    reload (the reload predicts the photo itself as the source does: the export records the model's own crop, mean
    and std beside model.pth), dense (base rows, seam_dense.py: `vitstudio segment` of two photos, one painted
    — a mask per photo at its size, JSON shares equal to the PNG's, painted pixels kept — and a point matched in its own
    photo in every facet the family gives, similarity 1 within a patch; Swin's one-line refusal), teach (seam_teach.py,
    four rows — vit and seed-prelogits taught on a 3-class project: 9/3 split, per-class accuracy = the confusion's
    diagonal share; deit-distilled and swin refused in `check_teachable`'s one line), scores (seam_scores.py, four rows
    — vit, deit-distilled, custom, hf-vit-headless: `vitstudio scores --json` of a 3-class folder, hardness equal to the
    entropy of the source's own forward, 1e-4, the given label its folder; headless: null hardness and mistakenness),
    view-export (seam_view_export.py, three rows — vit, hf-vit-headless, swin: `views --export V --csv F --coco J
    --masks P` on the dense cell's photos, the view holding one: its masks' classes, decoded by the test's RLE decoder,
    cover exactly the crop the model sees, its CSV's prediction and confidence are the source's own forward (1e-5),
    headless: empty prediction cells; Swin refused in one line with nothing written), registers (base rows: `explain
    --method norms,rollout --registers FILE` equal to explain() inside the test-time register, the register named in
    the norms; BEiT, relpos, CaiT, NaFlexViT and Swin refused with the core's reason); never a traceback. [parametrised
    ×336: 25 rows × 13 ops + 4 teach + 4 scores + 3 view-export] — the analyses are two operation groups of one CLI
    call each (issue 31): `explain-each` runs every applicable analysis at its own defaults (each file finite and equal
    to explain() with the same parameters; the logit lens's last-block probabilities equal the source's own forward,
    1e-5: what the 14 per-method `explain:*` cells checked, 350 cells merged into 25) and asks for each analysis that
    does not apply alone (refused in one line with the registry's reason, as those cells did); `explain-all` runs
    every one at layer 0. The fine-tune and LoRA columns and the run rows: tests/core/test_seam_matrix_runs.py
    """
    refused = len(REFUSALS)
    _cell(row, op, sources, photos, tmp_path)
    for line in REFUSALS[refused:]:  # counted by the matrix summary (--junitxml)
        record_property("refused", line)


def _cell(row, op, sources, photos, tmp_path):
    source = sources[row]
    photo = photos["chelsea"]
    if op == "load":
        try:
            loaded = load_model(source.spec, source.weights, "cpu", "fp32")
        except ModelLoadError as exc:
            assert "\n" not in str(exc) and "Traceback" not in str(exc)
            pytest.fail(f"refused: {exc}")
        x = _x(loaded, photo)
        if source.reference is not None:
            torch.testing.assert_close(forward_logits(loaded, x), source.reference(x), atol=1e-5, rtol=0)
        return
    globals()[f"_{op.replace('-', '_')}"](source, op, photo, tmp_path, sources)


def _card(source, op, photo, tmp_path, sources):
    code, out, err = cli(["card", *source.model_args, "--json", "--device", "cpu"])
    if assert_works_or_refuses(code, out, err, may_refuse=False):
        card = json.loads(out)
        loaded = _loaded(source)
        assert card["params"] == sum(p.numel() for p in loaded.model.parameters())
        assert tuple(card["input_size"][1:]) == loaded.input_hw and tuple(card["patch_size"]) == loaded.patch_size


def _predict(source, op, photo, tmp_path, sources):
    code, out, err = cli(["predict", photo, *source.model_args, "--json", "--quiet", "--topk", 3, "--device", "cpu",
                          "--precision", "fp32"])
    # a headless model has no classes to predict: the one case where predict refuses
    if not assert_works_or_refuses(code, out, err, may_refuse=source.reference is None) or source.reference is None:
        return
    loaded = _loaded(source)
    x = _x(loaded, photo)
    expected = source.reference(x)[0].softmax(-1)
    top = json.loads(out.strip().splitlines()[-1])["top"]
    assert [t["index"] for t in top] == expected.topk(3).indices.tolist()
    np.testing.assert_allclose([t["prob"] for t in top], expected.topk(3).values.numpy(), atol=1e-5)
    assert [t["label"] for t in top] == [loaded.labels[t["index"]] for t in top]


def _explain_each(source, op, photo, tmp_path, sources):
    """Every analysis that applies, in one call at each one's own default parameters (a patch at 0,0 where one is
    used): each file is finite where defined and equals explain() with the same. Every analysis that does not apply
    is asked for alone and refused in one line with the registry's reason."""
    loaded = _loaded(source)
    reasons = {m: why_not(loaded.model, m) for m in registry.REGISTRY}
    methods = [m for m, reason in reasons.items() if reason is None and not _needs_file(m)]
    folder = tmp_path / "each"
    code, out, err = cli(["explain", photo, *source.model_args, "--method", ",".join(methods), "--patch", "0,0",
                          "--out", folder, "--format", "npy", "--device", "cpu", "--precision", "fp32"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    image = _image(photo)
    for method in methods:
        analysis = registry.get(method)
        array = np.load(_saved(folder, method))
        # NaN marks what is not defined (outside a Swin window, CaiT's class-attention layers in distance)
        assert np.isfinite(array).any() and not np.isinf(array).any(), method
        expected = _explained(loaded, method, image if analysis.needs_image else None,
                              **({"patch": (0, 0)} if analysis.param("patch") else {}))
        np.testing.assert_allclose(array, expected, atol=1e-6, err_msg=method)
    if "logit-lens" in methods and source.reference is not None:  # the lens's last block is the source's forward
        sidecar = json.loads(Path(str(_saved(folder, "logit-lens")) + ".json").read_text())
        expected = zeroshot.probabilities(loaded, source.reference(_x(loaded, photo)))[0].numpy()
        np.testing.assert_allclose(sidecar["probabilities"][-1], expected, atol=1e-5)
    for method, reason in reasons.items():
        if reason is None:
            continue
        analysis = registry.get(method)
        code, out, err = cli(["explain", *([photo] if analysis.needs_image else []), *source.model_args, "--method",
                              method, *(["--patch", "0,0"] if analysis.param("patch") else []),
                              *(["--concept", "0"] if analysis.param("concept") else []), "--out",
                              tmp_path / f"{method}.npy", "--device", "cpu", "--precision", "fp32"])
        assert not assert_works_or_refuses(code, out, err), method
        assert reason.split(":")[0][:40] in err, (method, reason, err)


def _needs_file(method: str) -> bool:
    """An analysis of a file the user made (the concept map's concepts file): the `concepts` column makes one."""
    return any(p.kind == registry.FILE_KIND and p.required for p in registry.get(method).params)


def _concepts(source, op, photo, tmp_path, sources):
    """Concepts learned on four photos through the CLI, then the concept map (equal to explain()) and predict
    through the SAE with nothing switched off (equal to the source's own forward); one line where the family's
    blocks cannot carry concepts."""
    from vitstudio.core.analysis.explain import explain

    loaded = _loaded(source)
    photos = sorted(photo.parent.glob("*.*"))[:4]
    code, out, err = cli(["concepts", *photos, *source.model_args, "--size", 16, "--k", 2, "--epochs", 1, "--out",
                          tmp_path / "c", "--json", "--quiet", "--device", "cpu", "--precision", "fp32"])
    if not assert_works_or_refuses(code, out, err, may_refuse=why_not(loaded.model, "concept") is not None):
        assert why_not(loaded.model, "concept")[:40] in err
        return
    listed = json.loads(out)["concepts"]
    concept = max(listed, key=lambda c: c["images"])["index"]
    code, out, err = cli(["explain", photo, *source.model_args, "--method", "concept", "--concepts", tmp_path / "c",
                          "--concept", concept, "--out", tmp_path / "m.npy", "--device", "cpu", "--precision", "fp32"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    expected = explain(loaded, "concept", _image(photo), concepts=str(tmp_path / "c"), concept=concept).array
    np.testing.assert_allclose(np.load(tmp_path / "m.npy"), expected, atol=1e-6)
    if source.reference is None:
        return
    code, out, err = cli(["predict", photo, *source.model_args, "--concepts", tmp_path / "c.safetensors", "--json",
                          "--quiet", "--topk", 3, "--device", "cpu", "--precision", "fp32"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    expected = source.reference(_x(loaded, photo))[0].softmax(-1)
    top = json.loads(out.strip().splitlines()[-1])["top"]
    np.testing.assert_allclose([t["prob"] for t in top], expected.topk(3).values.numpy(), atol=1e-5)


def _dense(source, op, photo, tmp_path, sources):
    dense_cell(source, photo, tmp_path, cli, assert_works_or_refuses, _loaded(source))


def _teach(source, op, photo, tmp_path, sources):
    teach_cell(source, tmp_path, cli, assert_works_or_refuses, _loaded(source))


def _scores(source, op, photo, tmp_path, sources):
    scores_cell(source, tmp_path, cli, assert_works_or_refuses, _loaded(source))


def _view_export(source, op, photo, tmp_path, sources):
    view_export_cell(source, photo, tmp_path, cli, assert_works_or_refuses, _loaded(source))


def _saved(folder, method):
    (path,) = [p for p in folder.iterdir() if p.name == f"{method}.npy" or p.name.endswith(f".{method}.npy")]
    return path


def _explain_all(source, op, photo, tmp_path, sources):
    """Every analysis that applies, in one call at the first layer (CaiT's talking-heads layer, Swin's first stage),
    into a folder: each file equals explain() with the same parameters."""
    loaded = _loaded(source)
    methods = [m for m in registry.REGISTRY if why_not(loaded.model, m) is None and not _needs_file(m)]
    folder = tmp_path / "all"
    code, out, err = cli(["explain", photo, *source.model_args, "--method", ",".join(methods), "--layer", 0,
                          "--patch", "0,0", "--out", folder, "--format", "npy", "--device", "cpu", "--precision",
                          "fp32"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    image = _image(photo)
    for method in methods:
        expected = _explained(loaded, method, image if registry.get(method).needs_image else None, layer=0,
                              patch=(0, 0))
        np.testing.assert_allclose(np.load(_saved(folder, method)), expected, atol=1e-6, err_msg=method)


def _registers(source, op, photo, tmp_path, sources):
    """`explain --method norms,rollout --registers FILE` (a register on neuron 0 of block 0): where the core adds a
    test-time register to the family, each file equals explain() on the model with it and the norms name it; where
    not, one line with the core's reason."""
    from vitstudio.core.analysis.explain import explain
    from vitstudio.core.analysis.registers import FORMAT, test_time_register, why_no_register

    loaded = _loaded(source)
    reason = why_no_register(loaded.model)
    registers = tmp_path / "registers.json"
    registers.write_text(json.dumps({"format": FORMAT, "neurons": [{"layer": 0, "neuron": 0, "score": 1.0}]}))
    methods = [m for m in ("norms", "rollout") if why_not(loaded.model, m) is None]
    folder = tmp_path / "registered"
    code, out, err = cli(["explain", photo, *source.model_args, "--method", ",".join(methods), "--registers",
                          registers, "--out", folder, "--format", "npy", "--device", "cpu", "--precision", "fp32"])
    if not assert_works_or_refuses(code, out, err, may_refuse=reason is not None):
        assert reason in err, (reason, err)
        return
    image = _image(photo)
    with test_time_register(loaded, {0: [0]}):
        for method in methods:
            np.testing.assert_allclose(np.load(_saved(folder, method)), explain(loaded, method, image).array,
                                       atol=1e-6, err_msg=method)
    sidecar = json.loads(Path(str(_saved(folder, "norms")) + ".json").read_text())
    assert "test-time register" in sidecar["params"]["prefix_norms"]


def _embed(source, op, photo, tmp_path, sources):
    out_file = tmp_path / "e.npz"
    code, out, err = cli(["embed", photo, *source.model_args, "--out", out_file, "--device", "cpu", "--precision",
                          "fp32", "--quiet"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    saved = np.load(out_file)
    assert saved["features"].shape[0] == 1 and np.isfinite(saved["features"]).all()
    if source.reference is not None:
        loaded = _loaded(source)
        np.testing.assert_allclose(saved["logits"], source.reference(_x(loaded, photo)).numpy(), atol=1e-5)


def _compare_layers(source, op, photo, tmp_path, sources):
    """CKA of the row against itself on four photos: every block's feature read (one forward per batch, whatever the
    family), the diagonal 1."""
    from tests.core.test_layers import kornblith_cka
    from vitstudio.core.folder.layer_cache import embed_layers

    weights = ["--weights", source.weights] * 2 if source.weights else []
    code, out, err = cli(["compare-layers", *photo.parent.glob("*.*"), "--model", source.spec, "--model",
                          source.spec, *weights, "--json", "--device", "cpu", "--precision", "fp32"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    matrix = np.asarray(json.loads(out)["cka"])
    np.testing.assert_allclose(np.diag(matrix), 1.0, atol=1e-5)
    layers = drain(embed_layers(_loaded(source), [str(photo.parent)]))
    assert matrix.shape == (layers.blocks, layers.blocks) and layers.computed == 0  # the CLI's cache, read back
    assert abs(matrix[0, -1] - kornblith_cka(layers.block(0), layers.block(layers.blocks - 1))) < 1e-5


def _export_onnx(source, op, photo, tmp_path, sources):
    # the CLI checks ONNX Runtime's logits against PyTorch's itself (export fails above 1e-4)
    code, out, err = cli(["export", source.spec, *(["--weights", source.weights] if source.weights else []),
                          "--format", "onnx", "--out", tmp_path / "m.onnx"])
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    assert (tmp_path / "m.onnx").is_file() and "ONNX Runtime matches" in out


def _seed_export(source, sources):
    """(exit code, stdout, stderr, folder) of `vitstudio export SPEC --format seed`, once per row."""
    if "seed" not in source.notes:
        folder = sources.root / "seed-export" / source.row.replace(":", "-")
        code, out, err = cli(["export", source.spec, *(["--weights", source.weights] if source.weights else []),
                              "--format", "seed", "--out", folder])
        source.notes["seed"] = code, out, err, folder
    return source.notes["seed"]


def _export_seed(source, op, photo, tmp_path, sources):
    """Upstream's format holds only the plain ViT, so refusing is allowed; what is written must load strictly in
    upstream's VisionTransformer built by the printed constructor (an independent port), with the same logits on the
    same tensor."""
    from tests.core.seed_reference import SeedVisionTransformer

    code, out, err, folder = _seed_export(source, sources)
    if not assert_works_or_refuses(code, out, err):
        return
    loaded = _loaded(source)
    x = _x(loaded, photo)
    call = ast.parse(out.split("model = ", 1)[1].split("; model_weight_path", 1)[0], mode="eval").body
    assert call.func.id == "VisionTransformer", ast.unparse(call)  # the named in21k constructors are not tiny
    upstream = SeedVisionTransformer(**{k.arg: ast.literal_eval(k.value) for k in call.keywords}).eval()
    upstream.load_state_dict(torch.load(folder / "model.pth", weights_only=True))  # strict
    with torch.no_grad():
        torch.testing.assert_close(upstream(x), forward_logits(loaded, x), atol=1e-5, rtol=0)


def _seed_reload(source, op, photo, tmp_path, sources):
    """The seed export loads back in ViT Studio (README: 'loads in … ViT Studio') as the same model."""
    code, out, err, folder = _seed_export(source, sources)
    if not assert_works_or_refuses(code, out, err):
        return
    loaded = _loaded(source)
    x = _x(loaded, photo)
    back = load_model(str(folder), device="cpu", precision="fp32")
    torch.testing.assert_close(forward_logits(back, x), forward_logits(loaded, x), atol=1e-5, rtol=0)
    # the same answers from the photo itself: its own preprocessing came back, not upstream's Resize(256) →
    # CenterCrop(224) (a run at crop 1.0 came back at 0.875 and changed its answers: the walk)
    torch.testing.assert_close(forward_logits(back, _x(back, photo)), forward_logits(loaded, x), atol=1e-5, rtol=0)
