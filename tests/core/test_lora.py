"""LoRA / DoRA runs through peft (issue 34): one run gives the adapter folder peft loads and a merged run folder plain
timm loads, with the same logits; a stopped LoRA run resumes; families whose blocks read a weight without calling
the layer are refused with the reason."""

from __future__ import annotations

import importlib.util
import json
import shutil
import threading

import pytest
import timm
import torch

from tests.conftest import make_tiny_vit
from tests.core.generators import run
from tests.core.synthetic_data import make_dataset
from vitstudio.core.jobs import CancelToken
from vitstudio.core.train.engine import EpochMetrics, fine_tune
from vitstudio.core.train.recipes import make_config

# found, not imported: peft (with transformers) is 1.6 s of import in every test process that collects this file
pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed")


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    """A tiny base model folder (as timm saves one), and a LoRA run on it stopped after its first epoch and resumed
    to its third: (base folder, run folder, the records of both parts)."""
    root = tmp_path_factory.mktemp("lora")
    base = root / "base"
    timm.models.save_for_hf(make_tiny_vit(seed=3), str(base), safe_serialization=True)
    data = make_dataset(root / "data", per_class=12)
    config = _config(data, base, root / "run")
    cancel = CancelToken()

    def stop_after_first_epoch(record):
        if isinstance(record, EpochMetrics) and record.epoch == 0:
            threading.Timer(0.01, cancel.cancel).start()

    first, records = run(fine_tune(config, cancel), stop_after_first_epoch)
    resumed, more = run(fine_tune(config, resume=True))
    return base, root / "run", first, resumed, records + more


def _config(data, base, out):
    return make_config(str(data), str(base), str(out), preset="lora", epochs=3, batch_size=8, lora_r=4,
                       lora_targets=("qkv,fc1",), ema_decay=0.0)


def test_a_lora_run_writes_the_adapter_peft_loads_and_a_merged_model_timm_loads(lora_run):
    """A LoRA run (qkv and fc1 targets) stopped after epoch 0 and resumed to epoch 3;
    `PeftModel.from_pretrained(timm.create_model(BASE, num_classes=3), RUN/adapter)` gives the same logits as plain
    timm's `local-dir:RUN`, ViT Studio's load of `RUN/adapter` and of `RUN` (1e-5); adapter_config.json names the
    targets, the head in modules_to_save and the base; qkv changed, proj frozen; reference: peft and timm themselves.
    [fine-tune]
    """
    from peft import PeftModel

    from vitstudio.core.inference import forward_logits
    from vitstudio.core.models.loading import load_model

    base, out, first, resumed, records = lora_run
    assert first.status == "cancelled" and resumed.status == "finished" and resumed.epochs_done == 3
    assert [r.epoch for r in records if isinstance(r, EpochMetrics)][-2:] == [1, 2]  # resumed after epoch 0
    adapter_config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter_config["target_modules"] and set(adapter_config["target_modules"]) == {"qkv", "fc1"}
    assert adapter_config["modules_to_save"] == ["head"] and adapter_config["base_model_name_or_path"] == str(base)
    x = torch.randn(3, 3, 32, 32)
    # peft's own path: the base model as timm builds it with the run's classes, the adapter folder applied
    with_adapter = PeftModel.from_pretrained(
        timm.create_model(f"local-dir:{base}", pretrained=True, num_classes=3), str(out / "adapter")).eval()
    merged = timm.create_model(f"local-dir:{out}", pretrained=True).eval()  # the run folder, plain timm
    ours = load_model(str(out / "adapter"))  # ViT Studio loads the adapter folder by itself
    with torch.no_grad():
        reference = with_adapter(x)
        torch.testing.assert_close(merged(x), reference, atol=1e-5, rtol=0)
        torch.testing.assert_close(forward_logits(ours, x), reference, atol=1e-5, rtol=0)
        torch.testing.assert_close(forward_logits(load_model(str(out)), x), reference, atol=1e-5, rtol=0)
    assert ours.labels == ["blue", "green", "red"] and "adapter on" in ours.weights_source
    # the adapters did learn: the merged qkv is not the base's
    plain = timm.create_model(f"local-dir:{base}", pretrained=True)
    assert not torch.allclose(merged.blocks[0].attn.qkv.weight, plain.blocks[0].attn.qkv.weight)
    torch.testing.assert_close(merged.blocks[0].attn.proj.weight, plain.blocks[0].attn.proj.weight)  # frozen


def test_the_merged_lora_run_exports_to_onnx(lora_run, tmp_path):
    """The merged run's ONNX export matches ONNX Runtime (1e-4)."""
    pytest.importorskip("onnxruntime")
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.models.onnx_export import export_onnx

    export = export_onnx(load_model(str(lora_run[1])), tmp_path / "lora.onnx")
    assert export.max_abs_diff is not None and export.max_abs_diff < 1e-4


def test_an_adapter_folder_names_its_missing_base_model(lora_run, tmp_path):
    """An adapter folder whose base model is gone is refused in one line naming that base."""
    from vitstudio.core.models.loading import ModelLoadError, load_model

    base, out = lora_run[0], lora_run[1]
    moved = shutil.copytree(out / "adapter", tmp_path / "adapter")
    note = json.loads((moved / "vitstudio_adapter.json").read_text())
    note["base_model"] = str(tmp_path / "gone-base")
    (moved / "vitstudio_adapter.json").write_text(json.dumps(note))
    with pytest.raises(ModelLoadError, match=r"adapter for the base model .*gone-base"):
        load_model(str(moved))
    assert base.is_dir()


def test_dora_merges_exactly_and_blocks_that_bypass_a_layer_are_refused(tmp_path):
    """DoRA on qkv, proj, fc2 merged (merge_and_unload on a copy) gives the adapters' logits (1e-5), the patch
    embedding's `proj` untouched; BEiT refused (qkv's weight read without calling the layer), a target the blocks lack
    refused naming their linears.
    """
    from vitstudio.core.train.adapters import add_adapters, merged_copy

    config = make_config(str(tmp_path / "d"), "x", str(tmp_path / "o"), preset="dora", lora_r=2,
                         lora_targets=("qkv", "proj", "fc2"))
    wrapped = add_adapters(make_tiny_vit(), config, (32, 32))
    for name, p in wrapped.named_parameters():  # adapters start at zero: move them so the merge has work to do
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.1)
    wrapped.eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(merged_copy(wrapped)(x), wrapped(x), atol=1e-5, rtol=0)
    # `proj` also names the patch embedding's convolution: only the blocks' linears are targeted
    assert not any("patch_embed" in n and "lora" in n for n, _ in wrapped.named_parameters())
    beit = timm.create_model("beit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                             depth=1, num_heads=2, num_classes=3)
    with pytest.raises(ValueError, match=r"uses the weight of blocks\.0\.attn\.qkv without calling the layer"):
        add_adapters(beit, make_config("d", "x", "o", preset="lora"), (32, 32))
    with pytest.raises(ValueError, match=r"no linear layer named wq; their linears are fc1, fc2, proj, qkv"):
        add_adapters(make_tiny_vit(), make_config("d", "x", "o", preset="lora", lora_targets=("wq",)), (32, 32))


def test_an_adapter_swap_cut_short_puts_the_old_adapter_back(lora_run, tmp_path):
    """Killed between moving the old adapter folder aside and moving the new one in, the run folder has none: the
    next start or resume (its stale-file sweep) puts the old one back and removes the staging folder."""
    from vitstudio.core.train.runlock import remove_stale_files

    run = shutil.copytree(lora_run[1], tmp_path / "run")
    aside = run / ".old-adapter-x1"
    aside.mkdir()
    (run / "adapter").rename(aside / "adapter")
    (run / ".staging-adapter-y2").mkdir()  # the new one, never swapped in
    remove_stale_files(run)
    assert (run / "adapter" / "adapter_model.safetensors").is_file()
    assert not aside.exists() and not (run / ".staging-adapter-y2").exists()


def test_a_run_whose_adapter_and_merged_model_were_saved_at_different_epochs_says_so(lora_run, tmp_path):
    """A kill after the merged model of a new best epoch and before its adapter folder is swapped in leaves RUN/ at
    that epoch and RUN/adapter/ at an earlier one (max |Δlogit| 0.6-1.0). The adapter folder is refused in one line
    naming both epochs and the resume command; the merged model, a run that did not finish, says its adapter is
    another epoch's."""
    from vitstudio.core.models.loading import ModelLoadError, load_model

    run = shutil.copytree(lora_run[1], tmp_path / "run")
    note = json.loads((run / "adapter" / "vitstudio_adapter.json").read_text())
    assert note["fine_tuned"].endswith("epoch 3")
    note["fine_tuned"] = note["fine_tuned"].replace("epoch 3", "epoch 1")  # what the kill leaves
    (run / "adapter" / "vitstudio_adapter.json").write_text(json.dumps(note))
    status = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**status, "status": "running"}))  # killed
    with pytest.raises(ModelLoadError) as caught:
        load_model(str(run / "adapter"))
    said = str(caught.value)
    assert "\n" not in said and "adapter of epoch 1" in said and "is epoch 3" in said
    assert f"vitstudio finetune --out {run} --resume" in said
    assert "holds the adapter of epoch 1, not of this model's epoch 3" in " ".join(load_model(str(run)).notes)


def test_a_resumed_lora_run_is_the_uninterrupted_run(lora_run, tmp_path):
    """Stopped after its first epoch and resumed, the run draws the batches, crops and adapter-dropout masks an
    uninterrupted run draws (the checkpoint holds Python's, numpy's, the loader's and torch's random states): the
    same losses to the last bit and the same merged weights.

    [fine-tune]
    """
    from safetensors.torch import load_file

    base, out, _, _, records = lora_run
    _, whole = run(fine_tune(_config(out.parent / "data", base, tmp_path / "whole")))
    losses = lambda rs: [(r.epoch, r.train_loss, r.val_loss) for r in rs if isinstance(r, EpochMetrics)]  # noqa: E731
    assert len(losses(whole)) == 3 and losses(records) == losses(whole)
    resumed, uninterrupted = load_file(out / "model.safetensors"), load_file(tmp_path / "whole" / "model.safetensors")
    assert resumed.keys() == uninterrupted.keys() and all(torch.equal(resumed[k], uninterrupted[k]) for k in resumed)
