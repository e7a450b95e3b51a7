"""Folder embeddings, cached on disk: the pooled feature (what the head sees) and the logits of every image.

One cache per image tower (a fingerprint of its weights and preprocessing; `model_fingerprint` says when the head
and labels are part of it too) under the user's cache folder, never in the dataset. Rows are keyed by file content
(`keyedstore.py`: stat first, a hash of the bytes when the stat differs), so adding 10 images to a folder computes
10, a changed file is computed again (even with its size and mtime restored) and a renamed one is not. Features
(and logits, for models whose logits are not their head on the features) live in raw float32 files read through
`np.memmap`: 100k images of ViT-B (768 floats) are 300 MB on disk and stay off the heap.

The index is a journal appended per batch (cost proportional to the batch, not the cache); concurrent runs share
the cache under a file lock; rows a crash appended without their journal line are cut off. Rows of files that
changed are orphaned and compacted away when they outnumber the live ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from vitstudio.core.analysis.embeddings import pooled_features
from vitstudio.core.data.images import expand_path_names
from vitstudio.core.files import cache_dir as app_cache_dir
from vitstudio.core.folder import ray_jobs
from vitstudio.core.folder.keyedstore import KeyedRows, RowView, read_rows
from vitstudio.core.inference import decoded_batches
from vitstudio.core.jobs import CancelToken, Progress, Throttle
from vitstudio.core.models.model import LoadedModel


def embeddings_root() -> Path:
    return app_cache_dir() / "embeddings"


def head_on_pooled(model: nn.Module) -> nn.Module | None:
    """The module that turns the pooled features into the model's logits, for models whose forward_head is timm's
    plain one (pool, fc_norm, dropout, head: timm's ViT and EVA, seed heads, zero-shot heads); None for the others
    (a distilled model's two heads, DINOv2's class + mean head, Swin's pooling head), whose cache keeps logits."""
    from timm.models.eva import Eva
    from timm.models.vision_transformer import VisionTransformer

    plain = getattr(type(model), "forward_head", None) in (VisionTransformer.forward_head, Eva.forward_head)
    head = getattr(model, "head", None)
    return head if plain and isinstance(head, nn.Module) else None


def model_fingerprint(loaded: LoadedModel, whole: bool = False) -> str:
    """Stable across runs for the same weights; changes when any weight or the preprocessing does. One pass over
    the parameters (sum and a strided sample of each), ~50 ms for ViT-B on a CPU.

    When the logits are the head applied to the pooled features (`head_on_pooled`), the head and the labels are
    left out: models with the same image tower (a base model and its quick runs, a CLIP-style model under any
    classes) share one cache of features, each computing its logits from them with its own head (a matrix
    product, not a forward). Otherwise (or `whole`) the head and labels are part of the key."""
    digest = hashlib.sha1()
    model = loaded.model
    cfg = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(loaded.data_config.items())}
    shared = not whole and head_on_pooled(model) is not None
    header = ([type(model).__name__, str(getattr(model, "global_pool", "")), cfg, "trunk"] if shared
              else [loaded.architecture, cfg, loaded.labels])
    digest.update(json.dumps(header, default=str).encode())
    with torch.no_grad():
        for name, tensor in list(model.state_dict().items()):
            if shared and name.startswith("head."):
                continue
            flat = tensor.detach().reshape(-1).double()
            sample = flat[:: max(1, flat.numel() // 64)][:64]
            digest.update(name.encode())
            digest.update(np.asarray([flat.sum().item(), *sample.tolist()], np.float64).tobytes())
    return digest.hexdigest()[:20]


class HeadLogits:
    """Logits of cache rows, computed from their cached pooled features by the model's head: indexed like the
    memory-mapped logits of a cache that stores them (`logits[rows]`)."""

    def __init__(self, features: np.memmap, loaded: LoadedModel, head: nn.Module) -> None:
        # the head and the model's lock, not the LoadedModel: results kept on screen must not keep a model alive
        self.features, self.lock, self.head = features, loaded.lock, head

    def __getitem__(self, rows) -> np.ndarray:
        param = next(self.head.parameters(), None)  # where and in what the head computes (an Identity: as given)
        x = torch.from_numpy(read_rows(self.features, rows) if isinstance(rows, np.ndarray) else
                             np.array(self.features[rows]))  # a copy: the memmap is read-only (rows: or one row)
        if param is not None:
            x = x.to(param.device, param.dtype)
        with self.lock, torch.inference_mode():  # a few MB at a time (no rows: one empty chunk, (0, classes) out)
            return torch.cat([self.head(chunk).float().cpu() for chunk in x.split(8192)]).numpy()


@dataclass(frozen=True)
class FolderEmbeddings:
    """Every readable file in input order with its row in the cache's memory-mapped arrays."""

    paths: tuple[str, ...]
    rows: np.ndarray  # (N,) int64 rows into features/logits
    features: np.memmap  # (rows, D) float32, shared by all files the cache knows
    logits: np.memmap | HeadLogits  # (rows, C) float32: stored, or the head on the stored features
    labels: tuple[str, ...]  # the model's class names
    errors: tuple[tuple[str, str], ...]  # unreadable files, with the reason
    computed: int  # how many files were run through the model this time
    tower: str = ""  # the cache's key: another model with the same key reads these features without a forward
    content: str = ""  # the files' names and contents in one digest (KeyedRows.content_key)

    def features_of(self, index: np.ndarray | slice | None = None) -> np.ndarray:
        """Features of the files `index` (all by default) as an in-memory (n, D) array."""
        return read_rows(self.features, self.rows if index is None else self.rows[index])

    def view(self) -> RowView:
        """The features of these files, in order, read from the memory map on demand."""
        return RowView(self.features, self.rows)

    def probabilities(self) -> np.ndarray:
        logits = (read_rows(self.logits, self.rows) if isinstance(self.logits, np.memmap) else
                  self.logits[self.rows]).astype(np.float64)
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        return (p / p.sum(1, keepdims=True)).astype(np.float32)


class EmbeddingCache:
    """The on-disk cache of one model: rows of `features.f32` + `logits.f32` keyed by file content
    (`keyedstore.KeyedRows`: journaled index, safe under concurrent processes)."""

    def __init__(self, loaded: LoadedModel, root: Path | None = None) -> None:
        self.folder = (root or embeddings_root()) / model_fingerprint(loaded)
        self.loaded = loaded
        self.head = head_on_pooled(loaded.model)  # logits from the cached features: they are not stored
        columns = {"features.f32": "float32"} if self.head is not None else {"features.f32": "float32",
                                                                               "logits.f32": "float32"}
        self.store = KeyedRows(self.folder, columns, {"model": loaded.name, "architecture": loaded.architecture,
                                                      "classes": len(loaded.labels)})

    @property
    def index(self) -> dict:
        """What the cache holds now (other processes' rows included): rows, dim, classes, files."""
        with self.store.locked():
            return {"rows": self.store.rows, "dim": self.store.widths.get("features.f32", 0),
                    "classes": len(self.loaded.labels), "files": dict(self.store.files)}

    def lookup(self, path: Path) -> int | None:
        return self.store.lookup_readable(path)

    def append(self, paths: list[Path], features: np.ndarray, logits: np.ndarray) -> None:
        columns = {"features.f32": features} if self.head is not None else {"features.f32": features,
                                                                            "logits.f32": logits}
        self.store.append([str(p) for p in paths], columns)

    def arrays(self, arrays: dict | None = None) -> tuple[np.memmap, np.memmap | HeadLogits]:
        arrays = self.store.arrays() if arrays is None else arrays
        features = arrays["features.f32"]
        if self.head is not None:
            return features, HeadLogits(features, self.loaded, self.head)
        return features, arrays["logits.f32"]

    def resolve(self, files: list[Path], known: tuple | None = None
                ) -> tuple[list[Path], np.ndarray, np.memmap, np.memmap | HeadLogits]:
        """(files the cache holds, their rows, features, logits), consistent with each other: read under the shared
        lock, so a compaction by another process cannot move the rows in between (`known`: KeyedRows.resolve)."""
        good, rows, arrays = self.store.resolve(files, known)
        return (good, rows, *self.arrays(arrays))

    def compact(self) -> None:
        """Drop orphaned rows (files that changed since) when they are the majority."""
        self.store.compact()


def embed_folder(loaded: LoadedModel, paths: Iterable[str], batch_size: int = 32, cancel: CancelToken | None = None,
                 root: Path | None = None, decoder: str = "auto", ignored: list | None = None, alongside=None
                 ) -> Generator[Progress, None, FolderEmbeddings]:
    """Pooled features and logits of every image under `paths` (files and folders, recursively), from the cache
    where the file is unchanged, computed (and cached) otherwise. Yields Progress; returns FolderEmbeddings.
    Files of other types the walk met are appended to `ignored` as (path, reason) when it is given. `alongside`:
    other per-image work riding the same decode (`fill`)."""
    cache = EmbeddingCache(loaded, root)
    files = list(expand_path_names(paths, ignored=ignored))  # strings: 100k Path objects cost ~0.3 s
    known = cache.store.data, cache.store.lookup_many(files)
    errors, done = yield from fill(cache, loaded, files, ray_jobs.ModelPass(pooled_features, loaded), batch_size,
                                   cancel, decoder, "Embedding", known[1], alongside)
    good, rows, features, logits = cache.resolve([p for p in files if p not in errors] if errors else files,
                                                 None if done else known)  # all cached: no second stat per file
    return FolderEmbeddings(tuple(good), rows, features, logits, tuple(loaded.labels),
                            tuple(errors.items()), done - len(errors), cache.folder.name,
                            cache.store.content_key(good))


def fill(cache, loaded: LoadedModel, files: list[Path], compute, batch_size: int, cancel: CancelToken | None,
         decoder: str, verb: str, rows: np.ndarray | None = None, alongside=None
         ) -> Generator[Progress, None, tuple[dict[str, str], int]]:
    """Compute `compute(batch tensor) -> arrays` for the files `cache` does not hold yet and append them (a cache
    with store (KeyedRows), append(paths, *arrays) and compact()); returns ({path: why unreadable}, files read).
    `rows`: `cache.store.lookup_many(files)` when the caller has it. `alongside` (e.g.
    `fingerprintcache.FingerprintRider`): told the files to be decoded (`expect`), called on each decoded image
    (`decoded_batches(also=...)`) and handed each batch's values (`take`)."""
    # a FIFO is never hashed, a dangling link never raises (lookup_many): they go to the reader, which says why
    rows = cache.store.lookup_many(files) if rows is None else rows
    todo = [files[i] for i in np.flatnonzero(rows < 0)]
    errors: dict[str, str] = {}
    done, throttle = 0, Throttle(10)  # a GPU's batches come faster than a window needs to hear of them
    yield Progress(0, len(todo), f"{verb} {len(todo)} of {len(files)} images ({len(files) - len(todo)} cached)")
    if alongside is not None:
        alongside.expect(todo)
    # on a Ray cluster (`ray_jobs.on_cluster`) the same batches come back from its workers: this process alone
    # writes the cache either way
    batches = (ray_jobs.computed(loaded, todo, compute, batch_size, cancel, alongside, model_fingerprint)
               if todo and ray_jobs.active() else _computed_here(loaded, todo, compute, batch_size, cancel, decoder,
                                                                 alongside))
    for batch in batches:
        errors.update(batch.errors)
        if batch.arrays is not None:
            cache.append([Path(p) for p in batch.good], *batch.arrays)
        if alongside is not None:
            alongside.take(batch.extra)
        done += batch.count
        if throttle.ready(force=done == len(todo)):
            yield Progress(done, len(todo), f"{verb} images")
    cache.compact()
    return errors, done


def _computed_here(loaded: LoadedModel, todo: list, compute, batch_size: int | None, cancel: CancelToken | None,
                   decoder: str, alongside) -> Iterator[ray_jobs.Computed]:
    for batch in decoded_batches(loaded, [str(p) for p in todo], batch_size, cancel, decoder=decoder,
                                 also=alongside):
        good = [p for p, _ in batch.good]
        yield ray_jobs.Computed(good, compute(batch.tensor) if batch.tensor is not None else None,
                                dict(batch.errors), len(batch.items), batch.extra)
