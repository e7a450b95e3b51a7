"""The patch tokens of one block of every image of a folder, cached on disk per model and layer.

A row holds one image's patch tokens after block `layer` (the residual stream, before the final norm; prefix tokens
left out), (gh · gw · d) float16: a ViT-S/16 image is 150 KB, so 400 photos are 60 MB and the 1,797 digits through
the demo model 0.3 MB. Rows are keyed by file content like the folder embeddings (`folder/keyedstore.py`), under
cache/concepts/<model fingerprint>/layer-<L>, and read back as a memory map: training streams them in chunks, so
memory stays flat in the folder's size.

Under torchrun every process reads every N-th uncached image; rank 0 appends them all (as `folder/sharded.py`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.analysis.embeddings import layer_tokens
from vitstudio.core.data.images import expand_paths
from vitstudio.core.distributed import DistInfo, barrier
from vitstudio.core.files import cache_dir
from vitstudio.core.folder.embedcache import fill, model_fingerprint
from vitstudio.core.folder.keyedstore import KeyedRows
from vitstudio.core.folder.ray_jobs import ModelPass
from vitstudio.core.folder.sharded import gather_in_order, my_share
from vitstudio.core.inference import decoded_batches
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.models.structure import WINDOW, trunk_blocks

COLUMN = "tokens.f16"


def concept_layers_refusal(model) -> str | None:
    """None when the model's blocks carry one token sequence a concept can be read from and written back to."""
    blocks = trunk_blocks(model)
    if not blocks:
        return f"{type(model).__name__} has no transformer blocks to read concepts from."
    if any(b.kind == WINDOW for b in blocks):
        return (f"{type(model).__name__} works in local windows whose token grid changes per stage; concepts read "
                f"plain ViT blocks (ViT, DeiT, EVA, BEiT, CLIP's image towers).")
    return None


def default_layer(loaded: LoadedModel) -> int:
    """The block before the one the pooled output reads (the last): its tokens still describe the patches."""
    return max(0, loaded.token_depth - 2)


def check_layer(loaded: LoadedModel, layer: int | None) -> int:
    refusal = concept_layers_refusal(loaded.model)
    if refusal:
        raise ValueError(refusal)
    layer = default_layer(loaded) if layer is None else int(layer)
    if not 0 <= layer < loaded.token_depth:
        raise ValueError(f"Layer {layer} does not exist: {loaded.display_name} has blocks 0 to "
                         f"{loaded.token_depth - 1}.")
    return layer


def patch_tokens(loaded: LoadedModel, x: torch.Tensor, layer: int) -> np.ndarray:
    """(B, gh, gw, d) float32 patch tokens after block `layer`."""
    return layer_tokens(loaded, x, [layer])[layer].patches


def flat_tokens(loaded: LoadedModel, x: torch.Tensor, layer: int) -> tuple[np.ndarray]:
    """((B, gh · gw · d) float16 patch tokens after block `layer`,): a row of the token cache per image."""
    tokens = patch_tokens(loaded, x, layer)
    return (tokens.reshape(len(tokens), -1).astype(np.float16),)


@dataclass(frozen=True)
class FolderTokens:
    """Every readable file in input order, with its row in the cache's memory map."""

    paths: tuple[str, ...]
    rows: np.ndarray  # (N,) int64
    tokens: np.ndarray  # (rows, gh · gw · d) float16 memory map
    grid: tuple[int, int]
    width: int
    errors: tuple[tuple[str, str], ...]
    computed: int
    source: str  # the cache folder's name: what the tokens are (model fingerprint / layer)

    @property
    def patches(self) -> int:
        return self.grid[0] * self.grid[1]

    def of_images(self, index: np.ndarray) -> np.ndarray:
        """(len(index), gh · gw, d) float32 tokens of the files `index` (positions in `paths`)."""
        return np.asarray(self.tokens[self.rows[index]], np.float32).reshape(len(index), self.patches, self.width)


class TokenCache:
    def __init__(self, loaded: LoadedModel, layer: int, root: Path | None = None) -> None:
        self.loaded, self.layer = loaded, layer
        fingerprint = model_fingerprint(loaded)
        self.folder = (root or cache_dir() / "concepts") / fingerprint / f"layer-{layer}"
        self.source = f"{fingerprint}/layer-{layer}"
        self.store = KeyedRows(self.folder, {COLUMN: "float16"},
                               {"model": loaded.name, "architecture": loaded.architecture, "layer": layer})

    def lookup(self, path: Path) -> int | None:
        return self.store.lookup_readable(path)

    def compute(self, x: torch.Tensor) -> tuple[np.ndarray]:
        return flat_tokens(self.loaded, x, self.layer)

    def append(self, paths: list[Path], tokens: np.ndarray) -> None:
        self.store.append([str(p) for p in paths], {COLUMN: tokens})

    def compact(self) -> None:
        self.store.compact()

    def resolve(self, files: list[Path], errors: dict, computed: int) -> FolderTokens:
        found, rows, arrays = self.store.resolve(files)
        tokens, grid = arrays[COLUMN], self.loaded.grid_size
        width = tokens.shape[1] // (grid[0] * grid[1]) if tokens.shape[1] > 1 else 0
        return FolderTokens(tuple(map(str, found)), rows, tokens, grid, width, tuple(errors.items()), computed,
                            self.source)


def collect_tokens(loaded: LoadedModel, paths: Iterable[str], layer: int, batch_size: int = 32,
                   cancel: CancelToken | None = None, decoder: str = "auto", root: Path | None = None
                   ) -> Generator[Progress, None, FolderTokens]:
    """Block `layer`'s patch tokens of every image under `paths`, from the cache where the file is unchanged."""
    cache = TokenCache(loaded, layer, root)
    files = [Path(p) for p in expand_paths(paths)]
    errors, done = yield from fill(cache, loaded, files, ModelPass(flat_tokens, loaded, {"layer": layer}), batch_size,
                                   cancel, decoder, f"Reading block {layer}'s tokens of")
    return cache.resolve([p for p in files if str(p) not in errors], errors, done - len(errors))


def collect_sharded(loaded: LoadedModel, files: Sequence[str], layer: int, info: DistInfo, batch_size: int = 32,
                    cancel: CancelToken | None = None) -> Generator[Progress, None, FolderTokens | None]:
    """`collect_tokens` with the uncached images shared among the ranks; rank 0 writes the cache and returns the
    FolderTokens (the others None)."""
    cache = TokenCache(loaded, layer)  # read by every rank, written by rank 0 only
    files = [str(p) for p in expand_paths(files)]
    todo = [p for p in files if cache.lookup(Path(p)) is None]
    share = my_share(todo, info)
    rows, done = [], 0
    for batch in decoded_batches(loaded, [p for _, p in share], batch_size, cancel):
        if batch.tensor is not None:
            (tokens,) = cache.compute(batch.tensor)
            rows += [(p, t) for (p, _), t in zip(batch.good, tokens)]
        done += len(batch.items)
        yield Progress(done, len(share), f"Reading this process's {len(share)} of {len(todo)} new images")
    index = {p: i for i, p in enumerate(todo)}
    gathered = gather_in_order(info, [(index[p], (p, t)) for p, t in rows])
    if info.main and gathered:
        cache.append([Path(p) for p, _ in gathered], np.stack([t for _, t in gathered]))
    barrier(info)
    if not info.main:
        return None
    return (yield from collect_tokens(loaded, files, layer, batch_size, cancel))
