"""Multi-process work through PyTorch's own distributed engine (`torchrun --nproc-per-node N -m vitstudio
finetune|predict|embed …`): one process per device (DDP when training), rank 0 writes."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed() -> DistInfo:
    """Join the process group torchrun set up (env RANK/WORLD_SIZE/LOCAL_RANK); a no-op for a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(info.local_rank)
        dist.init_process_group(backend)
    return info


def device_for(info: DistInfo, requested: str) -> str:
    """Each process takes its own GPU; on the CPU all share it."""
    if info.enabled and torch.cuda.is_available() and requested in ("auto", "cuda"):
        return f"cuda:{info.local_rank}"
    return requested


def sum_across(info: DistInfo, *values: float) -> list[float]:
    if not info.enabled:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return t.cpu().tolist()


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def broadcast_flag(info: DistInfo, flag: bool) -> bool:
    """Rank 0's decision, for everyone (e.g. early stopping)."""
    if not info.enabled:
        return flag
    return bool(sum_across(info, float(flag) if info.main else 0.0)[0])


def finish(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
