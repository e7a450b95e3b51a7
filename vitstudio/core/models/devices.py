"""Device auto-selection (CUDA > MPS > CPU) and mixed-precision settings."""

from __future__ import annotations

import contextlib

import torch

from vitstudio.core.fields import PRECISIONS as CHOICES  # what users pick; 'auto' resolves per device
from vitstudio.core.jobs import GPUOutOfMemory

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}  # the autocast dtype of each other one


def available_devices() -> list[str]:
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def resolve_device(name: str = "auto") -> torch.device:
    """'auto' picks CUDA, then MPS, then CPU; an explicit name must be available here."""
    name = (name or "auto").lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ValueError(f"Unknown device '{name}'; use auto, cpu, cuda, cuda:N or mps.") from None
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise ValueError(f"Device '{name}' is not available here (available: {', '.join(available_devices())}).")
    if dev.type == "mps" and "mps" not in available_devices():
        raise ValueError(f"Device 'mps' is not available here (available: {', '.join(available_devices())}).")
    return dev


def validate_precision(precision: str, device: torch.device) -> None:
    if precision not in CHOICES:
        raise ValueError(f"Unknown precision '{precision}'; use one of {', '.join(CHOICES)}.")


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto': bf16 autocast on GPUs that support it (what users of these GPUs expect: about twice the speed,
    the range of fp32), fp32 elsewhere (CPUs, MPS, older GPUs); anything else as given."""
    if precision != "auto":
        return precision
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return "bf16"
    return "fp32"


def autocast(device: torch.device, precision: str, cache: bool = True):
    """A context that runs the forward under autocast for bf16/fp16, or does nothing for fp32. `cache=False` for
    CUDA graph capture (cached weight casts would be freed behind the graph)."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def out_of_memory_message(what: str, batch_size: int, baseline: int, peak: int, total: int) -> str:
    """What to do after a CUDA out-of-memory error at `batch_size`: the largest batch the measured memory suggests,
    at most half the failed one (the peak before the failure underestimates what the batch needed)."""
    per_image = max(1, peak - baseline) / max(1, batch_size)
    fits = int((0.9 * total - baseline) // per_image)
    suggestion = max(1, min(batch_size // 2, fits))
    return (f"The GPU ran out of memory {what} a batch of {batch_size} (this process had {peak / 2**30:.1f} of "
            f"{total / 2**30:.0f} GB, {baseline / 2**30:.1f} GB of it before the batch). A batch size of "
            f"{suggestion} should fit: set it (--batch-size, or the Batch size field) and run again.")


@contextlib.contextmanager
def explain_out_of_memory(device: torch.device, batch_size: int, what: str):
    """Turn a CUDA out-of-memory error inside the block into GPUOutOfMemory with a batch size that should fit."""
    if device.type != "cuda":
        yield
        return
    baseline = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    try:
        yield
    except torch.OutOfMemoryError:
        peak = torch.cuda.max_memory_allocated(device)
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.empty_cache()
        raise GPUOutOfMemory(out_of_memory_message(what, batch_size, baseline, peak, total)) from None


def memory_in_use(device: torch.device | None = None) -> str:
    """'RAM 1.20 GB' (this process's resident memory), with ' · GPU 3.10 of 80 GB' (memory held by tensors, of the
    card's total) when the model is on a CUDA device or a job has started using one."""
    text = ""
    try:
        with open("/proc/self/statm") as fh:
            import os

            text = f"RAM {int(fh.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 1e9:.2f} GB"
    except OSError:  # not Linux
        import resource

        text = f"peak RAM {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB"
    if (device is None or device.type != "cuda") and torch.cuda.is_initialized():
        device = torch.device("cuda")  # the model shown is on the CPU, but a job (training) is using the GPU
    if device is not None and device.type == "cuda":
        # tensors' memory (what a batch size changes), of the card's total; the caching allocator may hold more
        total = torch.cuda.get_device_properties(device).total_memory
        text += f" · GPU {torch.cuda.memory_allocated(device) / 1e9:.2f} of {total / 1e9:.0f} GB"
    return text


def pinned(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` in page-locked host memory when it is bound for a CUDA device, else as it is. Copies from pinned
    memory run at full DMA speed and, with non_blocking=True, return at once (the GPU's stream keeps the order)."""
    if device.type == "cuda" and tensor.device.type == "cpu" and not tensor.is_pinned():
        return tensor.pin_memory()
    return tensor


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host → device through pinned memory without blocking the host (see `pinned`); a no-op on the same device."""
    return pinned(tensor, device).to(device, non_blocking=True)


def stack_for(tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """torch.stack of host tensors, written straight into pinned memory when they are bound for a CUDA device
    (one copy, not stack-then-pin)."""
    if device.type != "cuda":
        return torch.stack(tensors)
    out = torch.empty((len(tensors), *tensors[0].shape), dtype=tensors[0].dtype, pin_memory=True)
    return torch.stack(tensors, out=out)
