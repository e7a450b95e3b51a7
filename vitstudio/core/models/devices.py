"""Device auto-selection (CUDA > MPS > CPU) and mixed-precision settings."""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


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
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision '{precision}'; use one of {', '.join(PRECISIONS)}.")


def autocast(device: torch.device, precision: str):
    """A context that runs the forward under autocast for bf16/fp16, or does nothing for fp32."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def memory_in_use(device: torch.device | None = None) -> str:
    """'RAM 1.2 GB' (this process's resident memory), plus the accelerator's allocated memory when there is one."""
    text = ""
    try:
        with open("/proc/self/statm") as fh:
            import os

            text = f"RAM {int(fh.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 1e9:.2f} GB"
    except OSError:  # not Linux
        import resource

        text = f"peak RAM {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB"
    if device is not None and device.type == "cuda":
        text += f" · GPU {torch.cuda.memory_allocated(device) / 1e9:.2f} GB"
    return text
