"""A folder's predictions from the embedding cache (`embedcache.py`): one pass computes the pooled features and
the logits of the files the cache does not hold yet; the predictions of every file are then read from the cache
(the head's matrix product on the stored features, or the stored logits), so a second `predict` of an unchanged
folder runs no forward at all, and a folder that `embed`, `audit` or the Folder tab has seen is predicted from
what they computed.

The records are the same as `inference.classify_files` gives (top-k, out-of-distribution score from the pooled
features), in input order with the unreadable files in their place, and come in chunks so that nothing of the
size of the folder is held but its paths and cache rows.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.folder.embedcache import FolderEmbeddings, embed_folder
from vitstudio.core.inference import Prediction, predictions_from, require_classifier
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models import ood
from vitstudio.core.models.model import LoadedModel

CHUNK = 4096  # predictions made at a time from the cache (a few MB of features)
GONE = "the file was moved or deleted while the folder was read"


@dataclass(frozen=True)
class FolderPredictions:
    """What the cache holds for `files` (in the order given), turned into Prediction records chunk by chunk."""

    loaded: LoadedModel
    files: tuple[str, ...]
    embedded: FolderEmbeddings
    topk: int

    def __len__(self) -> int:
        return len(self.files)

    def chunks(self, size: int = CHUNK) -> Iterator[list[Prediction]]:
        position = {p: i for i, p in enumerate(self.embedded.paths)}
        errors = dict(self.embedded.errors)
        with_bank = ood.bank_for(self.loaded) is not None  # the kNN score reads the pooled features
        for start in range(0, len(self.files), size):
            names = self.files[start:start + size]
            good = [n for n in names if n in position]
            made: dict[str, Prediction] = {}
            if good:
                rows = self.embedded.rows[[position[n] for n in good]]
                logits = torch.from_numpy(np.asarray(self.embedded.logits[rows], np.float32))
                pooled = np.asarray(self.embedded.features[rows], np.float32) if with_bank else None
                made = dict(zip(good, predictions_from(self.loaded, logits, pooled, good, self.topk)))
            yield [made.get(n) or Prediction(path=n, error=errors.get(n, GONE)) for n in names]


def predict_folder(loaded: LoadedModel, files: Sequence[str | Path], topk: int = 5, batch_size: int | None = None,
                   cancel: CancelToken | None = None, decoder: str = "auto"
                   ) -> Generator[Progress, None, FolderPredictions]:
    """Generator: the files' features and logits computed where the cache lacks them (Progress per batch), then
    their predictions (FolderPredictions.chunks)."""
    require_classifier(loaded)
    names = tuple(str(p) for p in files)
    embedded = yield from embed_folder(loaded, names, batch_size, cancel, decoder=decoder)
    return FolderPredictions(loaded, names, embedded, topk)
