"""The seam matrix's training half (tests/core/test_seam_matrix.py holds the rest and the cells' code): every base
row fine-tuned through `vitstudio finetune` (one step, reloaded from the run folder) and given LoRA adapters (the
lora preset's memory plan through the CLI, and its adapters merged exactly, or the one-line reason the family cannot
take them), and the run folder each fine-tune produces as a row of its own: load, card, predict, every analysis at
the first layer, embed, ONNX export, seed export and its reload. 25 base rows × 2 + 25 run rows × 8 = 250 cells.

A module of its own so that `--dist loadfile` runs it beside the other half on another worker; it builds again the
base rows it fine-tunes (a few seconds)."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.core.seam_rows import Sources, one_parser  # noqa: F401 - a fixture
from tests.core.test_seam_matrix import REFUSALS, _cell, _cells, _loaded, _x, assert_works_or_refuses, cli
from vitstudio.core.inference import forward_logits
from vitstudio.core.models.loading import load_model
from vitstudio.core.train.model_prep import new_head

pytestmark = pytest.mark.usefixtures("one_parser")


def _run_finetune(source, run):
    from tests.core.synthetic_data import make_dataset

    data = run.parent / "data"
    if not data.exists():
        make_dataset(data, per_class=4)  # 12 images: ~9 train = one step of 16, ~3 val
    code, out, err = cli(["finetune", data, *source.model_args, "--preset", "last-blocks", "--out", run,
                          "--epochs", 1, "--batch-size", 16, "--device", "cpu", "--precision", "fp32", "--quiet"])
    return code, out, err


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return Sources(tmp_path_factory.mktemp("seam-runs"), _run_finetune)


@pytest.mark.parametrize(("row", "op"), list(_cells(training=True)))
def test_cell(row, op, sources, photos, tmp_path, record_property):
    """Each base row fine-tunes and takes LoRA, and each run folder works as a row, or refuses in one line (exit 2);
    never a traceback. finetune: `vitstudio finetune --preset last-blocks` one step, the run folder reloads with the
    trained weights exactly (its checkpoint's), some weight moved off the base's, and its logits equal the base model
    built by ViT Studio with the engine's new head and the trained weights (strict) and the run folder's own forward
    (plain timm, or upstream's port for a representation layer), 1e-5. lora: `finetune --preset lora --plan` through
    the CLI, then the adapters moved off zero and merged give the same logits, 1e-5, and differ from the adapters
    switched off; or the family's one-line refusal equal to the core's — BEiT and EVA read qkv's weight directly. Run
    rows (`run:ROW`): load (equal to the run's own forward), card, predict, explain-all (every analysis that applies,
    at layer 0, equal to explain(); defaults and refusals are the base row's: the same architecture), embed, ONNX,
    seed export + reload (the reload predicts the photo itself as the run does: a run at crop 1.0 came back at the
    seed's 0.875: the walk). [parametrised ×250: 25 rows × 2 ops + 25 run rows × 8] [fine-tune per row]
    """
    refused = len(REFUSALS)
    if op in ("finetune", "lora"):
        {"finetune": _finetune, "lora": _lora}[op](sources[row], op, photos["chelsea"], tmp_path, sources)
    else:
        _cell(row, op, sources, photos, tmp_path)
    for line in REFUSALS[refused:]:  # counted by the matrix summary (--junitxml)
        record_property("refused", line)


def _finetune(source, op, photo, tmp_path, sources):
    code, out, err, run = sources.fine_tuned(source.row)
    assert assert_works_or_refuses(code, out, err, may_refuse=False)
    reloaded = load_model(str(run), device="cpu", precision="fp32")
    trained = torch.load(run / "checkpoint-last.pt", map_location="cpu", weights_only=True)["model"]
    state = reloaded.model.state_dict()
    assert set(state) == set(trained)
    for key, value in trained.items():
        torch.testing.assert_close(state[key], value, atol=0, rtol=0, msg=key)
    base = _loaded(source).model.state_dict()
    assert any(k in base and base[k].shape == v.shape and not torch.equal(base[k], v) for k, v in trained.items())
    x = _x(reloaded, photo)
    # the model as trained: the base model as ViT Studio built it, the engine's new head, the trained weights
    model = copy.deepcopy(_loaded(source).model)
    new_head(model, reloaded.labels, [], 0, reuse=False)
    model.load_state_dict(trained)  # strict
    with torch.no_grad():
        torch.testing.assert_close(forward_logits(reloaded, x), model.eval()(x), atol=1e-5, rtol=0)
    # and the run folder's own forward (plain timm, or upstream's port for a representation layer) agrees
    run_ref = sources[f"run:{source.row}"].reference
    torch.testing.assert_close(forward_logits(reloaded, x), run_ref(x), atol=1e-5, rtol=0)


def _lora(source, op, photo, tmp_path, sources):
    """The lora preset as the user meets it (`finetune --preset lora --plan`: the adapters put on the model, its
    memory planned on fake tensors), then the adapters themselves on the loaded model: moved off zero, merged into
    the weights they give the same logits; a family that cannot take them is refused with one line, the core's."""
    pytest.importorskip("peft")
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.train.adapters import add_adapters, merged_copy
    from vitstudio.core.train.recipes import make_config

    data = make_dataset(tmp_path / "data", per_class=2)
    code, out, err = cli(["finetune", data, *source.model_args, "--preset", "lora", "--plan", "--memory-limit", "64GB",
                          "--device", "cpu", "--precision", "fp32"])
    works = assert_works_or_refuses(code, out, err)
    loaded = _loaded(source)
    model = copy.deepcopy(loaded.model)
    new_head(model, ["a", "b", "c"], [], 0, reuse=False)
    config = make_config(str(data), source.spec, str(tmp_path / "run"), preset="lora", lora_r=2)
    if not works:
        with pytest.raises(ValueError) as refused:
            add_adapters(model, config, loaded.input_hw)
        assert str(refused.value) in err
        return
    assert "total (peak)" in out and "fits" in out
    wrapped = add_adapters(model, config, loaded.input_hw)
    for name, p in wrapped.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.1)
    x = _x(loaded, photo)
    with torch.no_grad():
        adapted = wrapped.eval()(x)
        torch.testing.assert_close(merged_copy(wrapped)(x), adapted, atol=1e-5, rtol=0)
        with wrapped.disable_adapter():  # the adapters are used: without them the logits are the base's
            assert not torch.equal(wrapped(x), adapted)

