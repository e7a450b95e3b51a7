"""Every block's feature of every image of a folder, cached on disk once per model: what the probes per layer
(`train/layer_probes.py`) and CKA between two models (`layer_compare.py`) read.

A block's feature is the prefix token after that block (the class token; the mean patch token for models without
one, Swin's stages included), raw, before the final norm: the same features for the probes and for CKA. Beside them
the cache keeps the logit lens's top-1 class after every block (for the models the lens reads), so the lens's
accuracy at each depth needs no second pass. All blocks come from one forward per batch; rows are keyed by file
content like the folder embeddings (`keyedstore.py`), under cache/layers/<fingerprint of the whole model: head
included, since the lens's classes depend on it>.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.analysis.capture import has_class_token
from vitstudio.core.analysis.embeddings import layer_tokens
from vitstudio.core.analysis.logit_lens import block_sequences, lens_readable, read_blocks
from vitstudio.core.data.images import expand_paths
from vitstudio.core.fields import LAYER_FEATURES
from vitstudio.core.files import cache_dir
from vitstudio.core.folder.embedcache import fill, model_fingerprint
from vitstudio.core.folder.keyedstore import KeyedRows, read_rows
from vitstudio.core.folder.ray_jobs import ModelPass
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.devices import explain_out_of_memory
from vitstudio.core.models.model import LoadedModel

FEATURE_NOTE = LAYER_FEATURES


@dataclass(frozen=True)
class FolderLayers:
    """Every readable file in input order, with its row in the cache's memory-mapped arrays."""

    paths: tuple[str, ...]
    rows: np.ndarray  # (N,) int64
    features: np.ndarray  # (rows, blocks · D) float32 memory map: block l is columns l·D … (l + 1)·D
    lens: np.ndarray | None  # (rows, blocks) float32 memory map of the lens's top-1 class, None if it does not read
    blocks: int
    labels: tuple[str, ...]  # the model's class names (what the lens's classes index)
    errors: tuple[tuple[str, str], ...]
    computed: int
    content: str = ""  # the files' names and contents in one digest (KeyedRows.content_key)

    @property
    def width(self) -> int:
        return self.features.shape[1] // self.blocks

    def block(self, layer: int, index: np.ndarray | None = None) -> np.ndarray:
        """(n, D) float32 features of block `layer` for the files `index` (all by default), read from the map."""
        rows = self.rows if index is None else self.rows[index]
        return read_rows(self.features, rows, slice(layer * self.width, (layer + 1) * self.width))

    def lens_top1(self) -> np.ndarray | None:
        """(N, blocks) int64: the lens's class after each block, or None for models the lens does not read."""
        return None if self.lens is None else read_rows(self.lens, self.rows).astype(np.int64)


def reads_lens(loaded: LoadedModel) -> bool:
    """The lens's classes are kept beside the features: a model the lens reads, with classes."""
    return lens_readable(loaded.model, None) is None and loaded.num_classes > 0


def layer_features(loaded: LoadedModel, x: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """((B, blocks · D) every block's feature, (B, blocks) the lens's top-1 after each block, or -1 where the lens
    does not read the model)."""
    model = loaded.model
    if reads_lens(loaded):
        with (loaded.lock, torch.inference_mode(), loaded.autocast(),
              explain_out_of_memory(loaded.device, len(x), "while reading the layers")):
            sequences = block_sequences(loaded, x)
            top1 = read_blocks(loaded, sequences).argmax(-1).float().cpu().numpy()
            prefix = loaded.num_prefix_tokens
            pick = (lambda h: h[:, 0]) if has_class_token(model) else (lambda h: h[:, prefix:].mean(1))
            feats = torch.cat([pick(h).float() for h in sequences], 1).cpu().numpy()
        return feats, top1
    tokens = layer_tokens(loaded, x)  # every token layer (Swin: its stages), one forward
    feats = [t.prefix[:, 0] if t.prefix.shape[1] and has_class_token(model) else
             t.patches.reshape(len(x), -1, t.patches.shape[-1]).mean(1) for t in tokens.values()]
    return np.concatenate(feats, 1), np.full((len(x), len(tokens)), -1, np.float32)


class LayerCache:
    """The on-disk cache of one model's layer features (`keyedstore.KeyedRows`: safe under concurrent runs)."""

    def __init__(self, loaded: LoadedModel, root: Path | None = None) -> None:
        self.folder = (root or cache_dir() / "layers") / model_fingerprint(loaded, whole=True)
        self.blocks = loaded.token_depth
        self.reads_lens = reads_lens(loaded)
        self.labels = tuple(loaded.labels)
        self.store = KeyedRows(self.folder, {"features.f32": "float32", "lens.f32": "float32"},
                               {"model": loaded.name, "architecture": loaded.architecture, "blocks": self.blocks})

    def lookup(self, path: Path) -> int | None:
        return self.store.lookup_readable(path)

    def append(self, paths: list[Path], features: np.ndarray, lens: np.ndarray) -> None:
        self.store.append([str(p) for p in paths], {"features.f32": features, "lens.f32": lens})

    def compact(self) -> None:
        self.store.compact()

    def resolve(self, files: list[Path], errors: dict, computed: int) -> FolderLayers:
        found, rows, arrays = self.store.resolve(files)
        return FolderLayers(tuple(map(str, found)), rows, arrays["features.f32"],
                            arrays["lens.f32"] if self.reads_lens else None, self.blocks,
                            self.labels, tuple(errors.items()), computed, self.store.content_key(found))


def embed_layers(loaded: LoadedModel, paths: Iterable[str], batch_size: int = 32, cancel: CancelToken | None = None,
                 root: Path | None = None, decoder: str = "auto") -> Generator[Progress, None, FolderLayers]:
    """Every block's feature (and the lens's class) of every image under `paths`, from the cache where the file is
    unchanged, computed in one forward per batch otherwise. Yields Progress; returns FolderLayers."""
    cache = LayerCache(loaded, root)
    files = [Path(p) for p in expand_paths(paths)]
    errors, done = yield from fill(cache, loaded, files, ModelPass(layer_features, loaded), batch_size, cancel,
                                   decoder, "Reading the layers of")
    return cache.resolve([p for p in files if str(p) not in errors], errors, done - len(errors))
