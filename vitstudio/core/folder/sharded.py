"""Folder inference across processes: `torchrun --nproc-per-node N -m vitstudio predict|embed PATHS …`.

Every process (one per GPU, or several sharing a CPU) takes every N-th file of the input list, works on its
share, and hands its results to rank 0 (`gather_object`: gloo on CPUs, NCCL on GPUs), which merges them back into
input order and writes the one result file. Only rank 0 writes, also to the embedding cache: the other ranks only
read it, so no two processes ever append to the same files.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path

import numpy as np
import torch.distributed as dist

from vitstudio.core.analysis.embeddings import pooled_features
from vitstudio.core.distributed import DistInfo, barrier
from vitstudio.core.folder.embedcache import EmbeddingCache, FolderEmbeddings, embed_folder
from vitstudio.core.inference import classify_files, decoded_batches
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel


def my_share(items: Sequence, info: DistInfo) -> list[tuple[int, object]]:
    """(index, item) of every world-th item from this rank: each item exactly once over all ranks, no padding."""
    return [(i, items[i]) for i in range(info.rank, len(items), info.world)]


def gather_in_order(info: DistInfo, pairs: list[tuple[int, object]]) -> list | None:
    """Rank 0: every rank's (index, value) pairs merged into index order; other ranks: None."""
    if not info.enabled:
        return [v for _, v in sorted(pairs, key=lambda p: p[0])]
    gathered = [None] * info.world if info.main else None
    dist.gather_object(pairs, gathered, dst=0)
    if not info.main:
        return None
    return [v for _, v in sorted((p for part in gathered for p in part), key=lambda p: p[0])]


def classify_sharded(loaded: LoadedModel, files: Sequence[str], info: DistInfo, topk: int = 5,
                     batch_size: int = 32, on_batch=None, decoder: str = "auto") -> list | None:
    """Predictions for every file in input order on rank 0 (None elsewhere); `on_batch(n)` after each batch."""
    share = my_share(files, info)
    results = []
    for batch in classify_files(loaded, [f for _, f in share], topk=topk, batch_size=batch_size, decoder=decoder):
        results.extend(batch)
        if on_batch is not None:
            on_batch(len(batch))
    return gather_in_order(info, [(i, pred) for (i, _), pred in zip(share, results)])


def embed_sharded(loaded: LoadedModel, files: Sequence[str], info: DistInfo, batch_size: int = 32,
                  cancel: CancelToken | None = None) -> Generator[Progress, None, FolderEmbeddings | None]:
    """Like `embed_folder`, the uncached files shared among the ranks; rank 0 caches everything and returns the
    FolderEmbeddings of `files` (other ranks return None)."""
    cache = EmbeddingCache(loaded)  # read by every rank, written by rank 0 only
    todo = [str(p) for p in files if cache.lookup(Path(p)) is None]
    share = my_share(todo, info)
    rows, done = [], 0
    for batch in decoded_batches(loaded, [p for _, p in share], batch_size, cancel):
        if batch.tensor is not None:
            features, logits = pooled_features(loaded, batch.tensor)
            rows += [(p, f, lg) for (p, _), f, lg in zip(batch.good, features, logits)]
        done += len(batch.items)
        yield Progress(done, len(share), f"Embedding this process's {len(share)} of {len(todo)} new images")
    index = {p: i for i, p in enumerate(todo)}
    gathered = gather_in_order(info, [(index[p], (p, f, lg)) for p, f, lg in rows])
    if info.main and gathered:
        cache.append([Path(p) for p, _, _ in gathered], np.stack([f for _, f, _ in gathered]),
                      np.stack([lg for _, _, lg in gathered]))
    barrier(info)
    if not info.main:
        return None
    # every readable file is cached by now: this reads them back in input order (and re-reports unreadable ones)
    result = yield from embed_folder(loaded, [str(p) for p in files], batch_size, cancel)
    return FolderEmbeddings(result.paths, result.rows, result.features, result.logits, result.labels,
                            result.errors, len(gathered or []), result.tower)
