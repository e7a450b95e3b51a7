"""CUDA graphs for small inference batches.

At batch 1–8 a ViT's forward on a GPU is bound by Python launching its ~150–400 kernels one by one, not by the
GPU; a CUDA graph records the launches once and replays them in one call. `inference.forward_logits` asks
`replay()` first and runs the model eagerly wherever it answers None: not CUDA, a larger batch, a model in train
mode, autograd on, graphs switched off (VITSTUDIO_CUDA_GRAPHS=0), a shape seen only once so far (one-off shapes are
not worth a capture), hooks installed at capture time (a graph would bake them in or skip them; attention capture
installs its hooks under the model's lock, which predictions also hold, so none are present during a replay), or a
model whose capture failed (remembered, never retried).

A graph reads the weights at the addresses they had when it was captured: in-place updates (training steps,
load_state_dict) are seen by the next replay, and a model whose tensors moved (`.to()`) is captured again; code that
swaps in new Parameter objects calls `forget(model)`. What runs per replay is cheap (~10 µs of checks for a ViT-B;
a walk over the modules would cost ~0.5 ms, a third of a graphed ViT-B forward). Graphs live in a WeakKeyDictionary
keyed by the module and hold no reference to it (only to its tensors), so they are freed with the model.
"""

from __future__ import annotations

import itertools
import logging
import os
import weakref

import torch
from torch import nn

from vitstudio.core.models.devices import autocast

MAX_BATCH = 8  # above this the GPU, not the launches, sets the pace (graphs would only cost memory)
CAPTURE_ON_CALL = 2  # capture on the second call of a shape
MAX_SHAPES = 4  # graphs kept per model (each holds its own activation memory)
_FAILED = "failed"

_graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> {key: calls | _Graph | _FAILED}
log = logging.getLogger(__name__)


def enabled() -> bool:
    return os.environ.get("VITSTUDIO_CUDA_GRAPHS", "1") != "0"


def applies(model: nn.Module, x: torch.Tensor, device: torch.device) -> bool:
    """Whether a graph may stand in for model(x) on `device` now (the per-call checks: all cheap)."""
    return (enabled() and device.type == "cuda" and x.shape[0] <= MAX_BATCH and not model.training
            and not torch.is_grad_enabled())


def _has_hooks(model: nn.Module) -> bool:
    return any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def _tensors(model: nn.Module) -> list[torch.Tensor]:
    return list(itertools.chain(model.parameters(), model.buffers()))


def _addresses(tensors: list[torch.Tensor]) -> tuple[int, ...]:
    return tuple(map(torch.Tensor.data_ptr, tensors))


class _Graph:
    """model(x) for one input shape, dtype and precision, captured once; `__call__` replays it."""

    def __init__(self, model: nn.Module, example: torch.Tensor, precision: str) -> None:
        self.tensors = _tensors(model)  # the model's own Parameter/buffer objects: `.to()` moves their data
        self.weights = _addresses(self.tensors)
        self.input = example.clone()  # the static input the graph reads
        device = example.device
        # warm up on a side stream (lazy initialisation, cuBLAS workspaces) as torch's capture recipe requires
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                with autocast(device, precision, cache=False):
                    model(self.input)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: a training job on another thread may allocate meanwhile; 'global' would fail its cudaMalloc
        with (torch.cuda.graph(self.graph, capture_error_mode="thread_local"),
              autocast(device, precision, cache=False)):
            self.output = model(self.input)

    def current(self) -> bool:
        """The weights still live where the graph reads them."""
        return _addresses(self.tensors) == self.weights

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.input.copy_(x, non_blocking=True)
        self.graph.replay()
        return self.output.clone()  # the static output is overwritten by the next replay


def replay(model: nn.Module, x: torch.Tensor, device: torch.device, precision: str) -> torch.Tensor | None:
    """model(x) by a CUDA graph (captured on the second call of this shape), or None: run the model eagerly.
    `x` is on `device` already; the caller holds the model's lock and inference mode."""
    if not applies(model, x, device):
        return None
    per_model = _graphs.setdefault(model, {})
    key = (tuple(x.shape), x.dtype, precision)
    entry = per_model.get(key, 0)
    if isinstance(entry, _Graph):
        if entry.current():
            return entry(x)
        entry = CAPTURE_ON_CALL - 1  # the tensors moved: capture again now
    if entry == _FAILED:
        return None
    calls = entry + 1
    graphs = sum(isinstance(v, _Graph) for v in per_model.values())
    if calls < CAPTURE_ON_CALL or graphs >= MAX_SHAPES or _has_hooks(model):
        per_model[key] = calls
        return None
    try:
        graph = _Graph(model, x, precision)
    except Exception as exc:  # noqa: BLE001 - an op that cannot be captured: this model stays eager
        log.warning("CUDA graph capture failed for %s (%s: %s); running it eagerly", type(model).__name__,
                    type(exc).__name__, exc)
        per_model[key] = _FAILED
        torch.cuda.synchronize(device)
        return None
    per_model[key] = graph
    return graph(x)


def forget(model: nn.Module) -> None:
    """Drop the model's graphs now (their memory is freed with the model anyway)."""
    _graphs.pop(model, None)
