"""The brain's scores of a folder, as fiftyone-brain computes them (voxel51/fiftyone-brain at 7238036,
`fiftyone/brain/internal/core/*.py`), on the embedding cache's pooled features and logits (`embedcache.py`):

- uniqueness (uniqueness.py:159-192, `_compute_uniqueness`): the distances to the K = 3 nearest other images,
  weighted 0.6 / 0.3 / 0.1 and averaged, divided by the largest. The distances are the ones its sklearn index
  measures (sklearn.py:814-836, `_build_neighbors`): Euclidean between the embeddings centred on their mean and
  scaled to unit length (cosine distance by its "cosine hack"). Below 15,000 images that index instead takes
  precomputed cosine distances with the diagonal set to NaN (sklearn.py:36, 795-806), so its `dists[:, 1:]` drops
  the nearest *other* image there; here it is always the nearest three others, as at 100k.
- representativeness (representativeness.py:155-231, method "cluster-center"): k-means with 20 clusters
  (random_state 1234) on the raw embeddings, each image's distance to its cluster's centre divided by the largest
  in that cluster (its "local" normalisation, which returns that normalised distance: 1 = the farthest of its
  cluster). Fewer than 20 images: one cluster per image at most; a cluster of identical images: 0, not NaN.
- hardness (hardness.py:116): the entropy (nats) of the softmax of the logits.
- mistakenness (mistakenness.py:529-536, `_compute_mistakenness_class`, with logits): m = 1 when the predicted
  class is the given label, else 0; (( 1 - 2m) · exp(-entropy) + 1) / 2. The given label is the image's folder
  name; images given outside a class folder have none, and no mistakenness (NaN, null in JSON). Nor have images
  whose folder name is not one of the model's classes: the model cannot predict that class, so m would be 0 for
  every one of them and the score would only measure confidence (ant photos through a digits model: 0.57-0.68
  each); `FolderScores.unknown` names those folders and `mistakenness_note` says why the score is empty.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitstudio.core.folder.embedcache import FolderEmbeddings, embed_folder, model_fingerprint
from vitstudio.core.folder.resultcache import load_result, result_key, save_result
from vitstudio.core.folder.score_names import NAMES
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel

K = 3  # uniqueness.py:162
WEIGHTS = np.asarray([0.6, 0.3, 0.1])  # uniqueness.py:186
CLUSTERS, SEED = 20, 1234  # representativeness.py:187, 198
SPARE = 8  # candidates past the K-th ranked by the product, whose exact distance is checked too
BLOCK_BYTES = 16 << 20  # the (block × N) float32 product at once: 256 queries up to 16k images, fewer beyond


@dataclass(frozen=True)
class FolderScores:
    paths: tuple[str, ...]
    given: tuple[str | None, ...]  # the folder each image is in (None: given outside a class folder)
    predicted: tuple[str, ...]
    uniqueness: np.ndarray  # (N,) float64 in [0, 1]
    representativeness: np.ndarray  # (N,) float64 in [0, 1]
    hardness: np.ndarray  # (N,) float64, nats
    mistakenness: np.ndarray  # (N,) float64 in [0, 1], NaN without a given label the model knows
    errors: tuple[tuple[str, str], ...] = ()
    unknown: tuple[str, ...] = ()  # given labels (folder names) that are not among the model's classes
    known: tuple[str, ...] = ()  # the model's classes, when some given label is unknown (to say what it knows)

    @property
    def mistakenness_note(self) -> str:
        """Why mistakenness is empty for the images of unknown classes ('' when every given label is the model's)."""
        if not self.unknown:
            return ""
        shown = ", ".join(self.unknown[:5]) + (f" and {len(self.unknown) - 5} more" if len(self.unknown) > 5 else "")
        known = ", ".join(self.known[:5]) + (", …" if len(self.known) > 5 else "")
        every = set(self.unknown) >= {g for g in self.given if g is not None}
        many = len(self.unknown) > 1
        whose = ("the folder's class name" if every else "class folder") + ("s" if many else "")
        return (f"{whose} {shown} {'are' if many else 'is'} not among the model's classes ({known}): the model "
                f"cannot predict {'them' if many else 'it'}, so mistakenness (the prediction against the folder's "
                f"name) is empty for {'every image' if every else 'those images'}")

    def mistakenness_notes(self) -> list[str]:
        """Per image, why it has no mistakenness ('' where it has one)."""
        unknown = set(self.unknown)
        return ["" if not np.isnan(m) else self.mistakenness_note if g in unknown else
                "outside a class folder" if g is None else "" for g, m in zip(self.given, self.mistakenness)]

    def rows(self) -> list[dict]:
        """One plain record per image (None for NaN)."""
        columns = [getattr(self, name) for name in NAMES]
        return [{"path": p, "given": g, "predicted": pred,
                 **{name: (None if np.isnan(v[i]) else float(v[i])) for name, v in zip(NAMES, columns)}}
                for i, (p, g, pred) in enumerate(zip(self.paths, self.given, self.predicted))]


def nearest_distances(features: np.ndarray, k: int = K, cancel: CancelToken | None = None) -> np.ndarray:
    """(N, k) Euclidean distances from each row to its k nearest other rows, ascending. Ranked by one matrix product
    per block of rows; the distances of the best k + SPARE are then taken from the differences in float64 (a product
    of near-identical unit rows cancels float32's digits)."""
    x = torch.from_numpy(np.ascontiguousarray(features, np.float32))
    x64 = x.double()
    n = len(x)
    take = min(n - 1, k + SPARE)
    out = np.empty((n, k))
    block = int(np.clip(BLOCK_BYTES // (4 * max(1, n)), 16, 256))  # 100k images: 41 rows (was 256: 100 MB)
    for start in range(0, n, block):
        if cancel is not None:  # between blocks: a closed window or another folder stops it
            cancel.raise_if_cancelled()
        rows = torch.arange(start, min(n, start + block))
        similarity = x[rows] @ x.T  # (b, N)
        similarity[torch.arange(len(rows)), rows] = -torch.inf  # not itself
        candidates = similarity.topk(take, dim=1).indices  # (b, take)
        exact = (x64[rows, None, :] - x64[candidates]).norm(dim=-1)  # (b, take)
        out[rows.numpy()] = exact.sort(dim=1).values[:, :k].numpy()
    return out


def uniqueness(features: np.ndarray, cancel: CancelToken | None = None) -> np.ndarray:
    n = len(features)
    if n <= K:  # uniqueness.py:165-166
        return np.ones(n)
    unit = np.array(features, np.float64)  # one copy, centred and normalised in place
    unit -= unit.mean(0, keepdims=True)
    unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-300)  # sklearn's normalize
    dists = nearest_distances(unit, K, cancel)
    weighted = np.mean(dists * WEIGHTS, axis=1)  # uniqueness.py:187
    return weighted / weighted.max() if weighted.max() > 0 else np.ones(n)


def representativeness(features: np.ndarray) -> np.ndarray:
    from sklearn.cluster import KMeans

    x = np.asarray(features)
    if len(x) == 0:
        return np.zeros(0)
    clusterer = KMeans(n_clusters=min(CLUSTERS, len(x)), random_state=SEED).fit(x)
    dists = np.linalg.norm(x - clusterer.cluster_centers_[clusterer.labels_], axis=1).astype(np.float64)
    for cluster in np.unique(clusterer.labels_):  # representativeness.py:223-229
        members = clusterer.labels_ == cluster
        top = dists[members].max()
        dists[members] = dists[members] / top if top > 0 else 0.0
    return dists


def entropy(logits: np.ndarray) -> np.ndarray:
    """(N,) entropy in nats of softmax(logits) per row (scipy.stats.entropy of scipy.special.softmax)."""
    z = np.asarray(logits, np.float64)
    z = z - z.max(1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -(np.exp(log_p) * log_p).sum(1)


def mistakenness(logits: np.ndarray, predicted: Sequence[str], given: Sequence[str | None]) -> np.ndarray:
    m = np.asarray([float(p == g) for p, g in zip(predicted, given)])  # mistakenness.py:248
    out = ((1.0 - 2.0 * m) * np.exp(-entropy(logits)) + 1.0) / 2.0  # mistakenness.py:531-534
    out[[g is None for g in given]] = np.nan
    return out


def given_labels(paths: Sequence[str], roots: Sequence[str]) -> tuple[str | None, ...]:
    """The folder each image is in, for images inside a folder under one of `roots` (None otherwise)."""
    tops = [Path(r).absolute() for r in roots if Path(r).is_dir()]
    out = []
    for p in paths:
        parent = Path(p).absolute().parent
        out.append(parent.name if any(parent != top and top in parent.parents for top in tops) else None)
    return tuple(out)


def brain_scores(embedded: FolderEmbeddings, given: Sequence[str | None], cancel: CancelToken | None = None
                 ) -> FolderScores:
    """Every score of the embedded images; `given`: their given labels, in the same order. `cancel` stops it
    between blocks of the nearest-neighbour search and before the k-means (`Cancelled`)."""
    features = embedded.features_of()
    n = len(embedded.paths)
    unique = uniqueness(features, cancel)
    if cancel is not None:
        cancel.raise_if_cancelled()
    central = representativeness(features)
    if not embedded.labels:  # a headless model: no prediction to be hard or mistaken
        nan = np.full(n, np.nan)
        return FolderScores(embedded.paths, tuple(given), ("",) * n, unique, central, nan, nan.copy(), embedded.errors)
    logits = np.asarray(embedded.logits[embedded.rows], np.float64).reshape(n, -1)
    predicted = tuple(embedded.labels[i] for i in logits.argmax(1))
    classes = set(embedded.labels)
    unknown = tuple(sorted({g for g in given if g is not None and g not in classes}))
    scored = [None if g in unknown else g for g in given]  # the model cannot predict them: no score, not 0.5+
    return FolderScores(embedded.paths, tuple(given), predicted, unique, central, entropy(logits),
                        mistakenness(logits, predicted, scored), embedded.errors, unknown,
                        tuple(embedded.labels) if unknown else ())


def score_folder(loaded: LoadedModel, paths: Sequence[str], batch_size: int | None = None,
                 cancel: CancelToken | None = None, ignored: list | None = None
                 ) -> Generator[Progress, None, FolderScores]:
    """Generator: the folder embedded (from the cache where it can), then its scores, kept (`resultcache.py`) under
    the files' contents, the whole model (its head makes the logits) and the given labels."""
    embedded = yield from embed_folder(loaded, paths, batch_size, cancel, ignored=ignored)
    return (yield from embedded_scores(loaded, embedded, paths, cancel))


def embedded_scores(loaded: LoadedModel, embedded: FolderEmbeddings, paths: Sequence[str],
                    cancel: CancelToken | None = None) -> Generator[Progress, None, FolderScores]:
    """Generator: the scores of a folder already embedded through `loaded` from `paths` (the Folder tab's, after its
    scan), read from or kept in the result cache under the same key as `score_folder`'s."""
    given = given_labels(embedded.paths, paths)
    key = result_key("scores", model_fingerprint(loaded, whole=True), embedded.content, given,
                     sorted(embedded.errors), "unknown classes")  # kept before those had no score: computed again
    scores = load_result("scores", key)
    if not isinstance(scores, FolderScores):
        yield Progress(0, 0, f"Scoring {len(embedded.paths)} images")
        scores = brain_scores(embedded, given, cancel)
        save_result("scores", key, scores)
    return scores
