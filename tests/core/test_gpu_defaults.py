"""GPU defaults that run on any machine: 'auto' precision resolves per device (bf16 on GPUs that support it, fp32
elsewhere), and a CUDA out-of-memory error becomes one clear message with a batch size that should fit — from
training, classification and embedding, in the CLI as one line with exit 2 — while the process goes on."""

from __future__ import annotations

import pytest
import torch

from vitstudio.core.jobs import GPUOutOfMemory
from vitstudio.core.models import devices
from vitstudio.core.models.loading import load_model

SPEC = "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3"


def test_auto_precision():
    """Auto → fp32 on CPU (bf16 on a CUDA GPU that supports it); unknown precision raises."""
    assert devices.resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert devices.resolve_precision("bf16", torch.device("cpu")) == "bf16"
    assert load_model(SPEC).precision == "fp32"  # the default is auto: fp32 on a CPU
    if torch.cuda.is_available():
        expected = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        assert devices.resolve_precision("auto", torch.device("cuda")) == expected
    with pytest.raises(ValueError, match="Unknown precision"):
        devices.validate_precision("fp8", torch.device("cpu"))


def test_out_of_memory_message_suggests_what_fits():
    """Suggested batch size from baseline/peak/total memory (capped at half, floor 1); reference: the arithmetic written
    in the test's comments.
    """
    gb = 2**30
    text = devices.out_of_memory_message("while training on", 256, baseline=10 * gb, peak=70 * gb, total=80 * gb)
    # 60 GB for 256 images ≈ 0.23 GB each; (72 − 10) / 0.23 ≈ 264, but never more than half the failed batch
    assert "batch of 256" in text and "A batch size of 128 should fit" in text
    text = devices.out_of_memory_message("while classifying", 64, baseline=30 * gb, peak=79 * gb, total=80 * gb)
    assert "A batch size of 32 should fit" in text  # (72 − 30) / (49 / 64) = 54 → capped at 32
    text = devices.out_of_memory_message("while classifying", 64, baseline=70 * gb, peak=79 * gb, total=80 * gb)
    assert "A batch size of 14 should fit" in text  # (72 − 70) / (9 / 64) = 14
    text = devices.out_of_memory_message("while classifying", 64, baseline=75 * gb, peak=79 * gb, total=80 * gb)
    assert "A batch size of 1 should fit" in text  # nothing left under 90 %: the smallest batch


class _FakeCuda:
    type = "cuda"


def _oom(*_args, **_kwargs):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def _fake_cuda_memory(monkeypatch):
    gb = 2**30
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 4 * gb)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 40 * gb)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: type("P", (), {"total_memory": 80 * gb})())


def test_out_of_memory_while_classifying_is_one_line_in_the_cli(monkeypatch, photos, capsys):
    """A faked CUDA OOM in forward raises GPUOutOfMemory with a batch suggestion; `predict` exits 2 with one "error:"
    line, no traceback.
    """
    import vitstudio.core.inference as inference
    from vitstudio.cli import main
    from vitstudio.core.inference import forward_logits

    loaded = load_model(SPEC)
    _fake_cuda_memory(monkeypatch)
    monkeypatch.setattr(loaded.model, "forward", _oom)
    real = inference.explain_out_of_memory  # the model runs on a "GPU" that has no room left
    monkeypatch.setattr(inference, "explain_out_of_memory", lambda device, n, what: real(_FakeCuda(), n, what))
    with pytest.raises(GPUOutOfMemory, match="batch of 5 .* A batch size of 2 should fit"):
        forward_logits(loaded, torch.zeros(5, 3, 32, 32))
    monkeypatch.setattr("vitstudio.cli.predict.load_model_from_args", lambda args: loaded)
    assert main(["predict", str(photos["coffee"]), "--model", SPEC]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: The GPU ran out of memory while classifying a batch of 1")
    assert "Traceback" not in "\n".join(err)


def test_out_of_memory_while_training_names_the_batch_size(monkeypatch, tmp_path):
    """A faked OOM in a training step raises GPUOutOfMemory naming batch 4 and suggesting 2."""
    from tests.core.generators import drain
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.train import engine
    from vitstudio.core.train.recipes import make_config

    data = make_dataset(tmp_path / "data", per_class=4)
    config = make_config(str(data), SPEC, str(tmp_path / "run"), "scratch", epochs=1, batch_size=4)
    real = engine.explain_out_of_memory

    def on_fake_gpu(device, batch_size, what):  # the training step runs on a "GPU" that has no room left
        _fake_cuda_memory(monkeypatch)

        class Step:
            def __enter__(self):
                self.inner = real(_FakeCuda(), batch_size, what)
                return self.inner.__enter__()

            def __exit__(self, *exc):
                return self.inner.__exit__(torch.OutOfMemoryError, torch.OutOfMemoryError("out of memory"), None)

        return Step()

    monkeypatch.setattr(engine, "explain_out_of_memory", on_fake_gpu)
    with pytest.raises(GPUOutOfMemory, match="while training on a batch of 4 .* A batch size of 2 should fit"):
        drain(engine.fine_tune(config))


def test_host_copies_pin_only_for_cuda():
    """On CPU `pinned`/`to_device` return the same tensor, `stack_for` equals torch.stack; on CUDA the stack is pinned
    once and moves correctly.
    """
    tensors = [torch.randn(3, 4, 4) for _ in range(3)]
    cpu = torch.device("cpu")
    assert devices.pinned(tensors[0], cpu) is tensors[0]  # nothing to gain on the host: no copy
    assert devices.to_device(tensors[0], cpu) is tensors[0]
    assert torch.equal(devices.stack_for(tensors, cpu), torch.stack(tensors))
    if torch.cuda.is_available():
        cuda = torch.device("cuda")
        stacked = devices.stack_for(tensors, cuda)
        assert stacked.is_pinned() and torch.equal(stacked, torch.stack(tensors))
        assert devices.pinned(stacked, cuda) is stacked  # already pinned: no second copy
        moved = devices.to_device(stacked, cuda)
        assert moved.is_cuda and torch.equal(moved.cpu(), stacked)


def test_status_bar_memory_names_the_gpu_share(monkeypatch):
    """`memory_in_use` text "RAM … · GPU 3.10 of 80 GB", GPU part only when CUDA is initialised."""
    class Props:
        total_memory = 80 * 10**9

    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 3_100_000_000)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: Props())
    text = devices.memory_in_use(torch.device("cuda"))
    assert text.startswith("RAM ") and text.endswith(" · GPU 3.10 of 80 GB")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert "GPU" not in devices.memory_in_use(torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)  # a training job on the GPU, the model on the CPU
    assert devices.memory_in_use(torch.device("cpu")).endswith(" · GPU 3.10 of 80 GB")
