"""CUDA graphs for small inference batches: when a graph may stand in for the model, the bookkeeping around
captures (second call, moved weights, failures, a cap per model, freed with the model) — driven here with a stand-in
for the capture so it runs on any machine — and, with CUDA, real graphs against the eager forward."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from vitstudio.core.inference import forward_logits
from vitstudio.core.models import cuda_graphs
from vitstudio.core.models.loading import load_model

SPEC = "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3"
CUDA = torch.device("cuda")


def test_when_a_graph_applies(monkeypatch):
    """`applies` is true only for CUDA, batch ≤ MAX_BATCH, eval mode, inference mode and VITSTUDIO_CUDA_GRAPHS not "0".
    """
    model = load_model(SPEC).model.eval()
    x = torch.zeros(1, 3, 32, 32)
    with torch.inference_mode():
        assert cuda_graphs.applies(model, x, CUDA)
        assert not cuda_graphs.applies(model, x, torch.device("cpu"))
        assert not cuda_graphs.applies(model, torch.zeros(cuda_graphs.MAX_BATCH + 1, 3, 32, 32), CUDA)
        model.train()
        assert not cuda_graphs.applies(model, x, CUDA)
        model.eval()
        monkeypatch.setenv("VITSTUDIO_CUDA_GRAPHS", "0")
        assert not cuda_graphs.applies(model, x, CUDA)
    monkeypatch.delenv("VITSTUDIO_CUDA_GRAPHS")
    assert not cuda_graphs.applies(model, x, CUDA)  # autograd on: a graph would drop the backward


class StandIn:
    """Records captures and answers with the eager forward, like a replay would."""

    captures: list = []
    fail = False

    def __init__(self, model, example, precision):
        if StandIn.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.tensors = cuda_graphs._tensors(model)
        self.weights = cuda_graphs._addresses(self.tensors)
        self.model_ref = weakref.ref(model)  # a graph must not keep its model alive
        StandIn.captures.append((tuple(example.shape), precision))

    current = cuda_graphs._Graph.current

    def __call__(self, x):
        return self.model_ref()(x) + 1000  # marks answers that came from the "graph"


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(cuda_graphs, "_Graph", StandIn)
    monkeypatch.setattr(cuda_graphs, "applies", lambda model, x, device: x.shape[0] <= cuda_graphs.MAX_BATCH)
    monkeypatch.setattr(cuda_graphs.torch.cuda, "synchronize", lambda device=None: None)
    StandIn.captures, StandIn.fail = [], False
    return StandIn


def test_capture_on_second_call_then_replay_until_the_weights_move(stand_in):
    """First call eager, second captures, third replays; another precision is another graph; moved weight tensors
    trigger a recapture.
    """
    model = load_model(SPEC).model.eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.inference_mode():
        eager = model(x)
        assert cuda_graphs.replay(model, x, CUDA, "fp32") is None  # first call of the shape: eager
        assert torch.allclose(cuda_graphs.replay(model, x, CUDA, "fp32"), eager + 1000)  # captured
        assert torch.allclose(cuda_graphs.replay(model, x, CUDA, "fp32"), eager + 1000)  # replayed
        assert stand_in.captures == [((1, 3, 32, 32), "fp32")]
        assert cuda_graphs.replay(model, x, CUDA, "bf16") is None  # another precision is another graph
    model.head.weight.data = model.head.weight.data.clone()  # the tensor moved (as after .to())
    with torch.inference_mode():
        assert cuda_graphs.replay(model, x, CUDA, "fp32") is not None
    assert len(stand_in.captures) == 2  # captured again at once


def test_no_capture_while_hooks_are_installed(stand_in):
    """Attention capture hooks attn_drop: a graph captured then would bake the hook's work in (or skip it later)."""
    model = load_model(SPEC).model.eval()
    x = torch.randn(1, 3, 32, 32)
    handle = model.blocks[0].attn.attn_drop.register_forward_hook(lambda *a: None)
    with torch.inference_mode():
        assert [cuda_graphs.replay(model, x, CUDA, "fp32") for _ in range(3)] == [None] * 3
    assert stand_in.captures == []
    handle.remove()
    with torch.inference_mode():
        assert cuda_graphs.replay(model, x, CUDA, "fp32") is not None  # captured now
    assert len(stand_in.captures) == 1


def test_a_failed_capture_stays_eager_and_is_not_retried(stand_in):
    """A capture that raises leaves that shape eager for good."""
    model = load_model(SPEC).model.eval()
    x = torch.randn(2, 3, 32, 32)
    stand_in.fail = True
    with torch.inference_mode():
        results = [cuda_graphs.replay(model, x, CUDA, "fp32") for _ in range(4)]
    assert results == [None] * 4
    stand_in.fail = False
    with torch.inference_mode():
        assert cuda_graphs.replay(model, x, CUDA, "fp32") is None
    assert stand_in.captures == []


def test_graphs_per_model_are_capped_and_freed_with_the_model(stand_in):
    """At most MAX_SHAPES captures per model; graphs do not keep the model alive and are dropped with it."""
    model = load_model(SPEC).model.eval()
    before = len(cuda_graphs._graphs)
    with torch.inference_mode():
        for batch in range(1, cuda_graphs.MAX_SHAPES + 3):
            x = torch.randn(batch, 3, 32, 32)
            cuda_graphs.replay(model, x, CUDA, "fp32")
            cuda_graphs.replay(model, x, CUDA, "fp32")
    assert len(stand_in.captures) == cuda_graphs.MAX_SHAPES
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None
    assert len(cuda_graphs._graphs) == before


def test_cpu_predictions_never_touch_graphs():
    """CPU `forward_logits` equals the plain model forward and registers no graph."""
    loaded = load_model(SPEC)
    x = torch.randn(1, 3, 32, 32)
    for _ in range(3):
        logits = forward_logits(loaded, x)
    with torch.inference_mode():
        assert torch.allclose(logits, loaded.model(x), atol=1e-6)
    assert loaded.model not in cuda_graphs._graphs


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@needs_cuda
@pytest.mark.parametrize("precision, atol", [("fp32", 1e-4), ("bf16", 5e-2)])
def test_gpu_graph_replays_equal_the_eager_forward(precision, atol):
    """On CUDA: eager/capture/replay equal the eager forward, a new input reuses the graph, in-place weight updates are
    seen by the replay; reference: the model's eager forward. [CUDA only] [parametrised ×2]
    """
    loaded = load_model("custom:img=64,patch=16,width=64,depth=2,heads=2,classes=10", device="cuda",
                        precision=precision)
    x = torch.randn(2, 3, 64, 64)
    with torch.inference_mode(), loaded.autocast():
        eager = loaded.model(x.cuda()).float().cpu()
    outputs = [forward_logits(loaded, x) for _ in range(3)]  # eager, capture, replay
    assert isinstance(cuda_graphs._graphs[loaded.model][((2, 3, 64, 64), torch.float32, precision)],
                      cuda_graphs._Graph)
    for out in outputs:
        torch.testing.assert_close(out, eager, atol=atol, rtol=0)
    other = torch.randn(2, 3, 64, 64)  # a new input goes through the same graph
    with torch.inference_mode(), loaded.autocast():
        expected = loaded.model(other.cuda()).float().cpu()
    torch.testing.assert_close(forward_logits(loaded, other), expected, atol=atol, rtol=0)
    with torch.no_grad():  # in-place weight updates (training steps) are what the next replay reads
        loaded.model.head.bias.add_(1.0)
    torch.testing.assert_close(forward_logits(loaded, other), expected + 1.0, atol=atol, rtol=0)


@needs_cuda
def test_gpu_graphs_are_freed_with_their_model():
    """On CUDA, deleting the model frees it and empties the graph table. [CUDA only]"""
    loaded = load_model(SPEC, device="cuda")
    x = torch.randn(1, 3, 32, 32)
    for _ in range(3):
        forward_logits(loaded, x)
    gone = weakref.ref(loaded.model)
    del loaded
    gc.collect()
    assert gone() is None
    assert len(cuda_graphs._graphs) == 0
