"""Does this model fit these images? An out-of-distribution score for every prediction.

Calibrated where the training data is known: a run fine-tuned by ViT Studio (and the bundled demo model) keeps a
bank of its training images' pooled features, L2-normalised, in `ood_bank.safetensors` beside its weights. An
image's score is the Euclidean distance from its normalised feature to the k-th nearest bank row (Sun et al. 2022,
"Out-of-distribution detection with deep nearest neighbors", ICML): higher = less like the training data. The
threshold is the 95th percentile of the validation images' scores (images the bank does not hold), so about 5 %
of in-distribution images are flagged, the operating point of the paper.

A threshold alone does not say the score can tell this model's data from other images (a small model fine-tuned on
photos scored handwritten digits under it). At the end of a run the score's AUROC between its validation images and
a standard set of outside images is measured per kind (core/train/ood_separation.py) and kept with the bank; below
`MIN_AUROC` an image under the threshold is "cannot tell", not "like the training data", and none is flagged.

Without a bank the score falls back to 1 − the top softmax probability (Hendrycks & Gimpel 2017): uncalibrated,
so nothing is flagged (no threshold would mean the same thing for 10 and 1000 classes) and callers say so.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vitstudio.core.files import shown_path
from vitstudio.core.models.model import LoadedModel

BANK_FILE = "ood_bank.safetensors"
# The paper's k is 50 for CIFAR-10's 50,000 training images and scales with the share of them kept in the bank
# (its Table 5: k·α for a fraction α): one neighbour per 1,000 bank rows, at least one.
ROWS_PER_NEIGHBOUR = 1000
MAX_BANK_ROWS = 4000  # keeps the file small (fp16: 4000 × 768 × 2 B ≈ 6 MB at ViT-B width) and a query fast
ID_QUANTILE = 0.95  # share of held-out in-distribution images kept under the threshold
# The lowest AUROC among the outside kinds that decide, below which the score is not trusted either way. Measured
# (tests/benchmarks/ood_separation.py): a kind at AUROC ≥ 0.99 had every image flagged at the threshold, the photo
# run's digits at 0.946 still 29 % under it; the digits demo's kinds 0.991-0.994, a photo run fine-tuned from it
# 0.76-0.95 (its noise 17 % flagged).
MIN_AUROC = 0.95
# Measured and kept, but no test of the score: a rotated photo of an ant is still one, a rotated 0, 1 or 8 a digit
NEAR_KINDS = ("rotated",)


@dataclass(frozen=True)
class OODBank:
    """Normalised pooled features of a model's training images and the threshold calibrated on held-out ones."""

    features: np.ndarray  # (N, D) float16, rows of unit length
    threshold: float  # scores above it are flagged
    k: int
    description: str  # what the training images were, in words ("32×32 grey digits")
    separation: dict = field(default_factory=dict)  # {outside kind: AUROC against the validation images}

    @property
    def auroc(self) -> float | None:
        """The lowest AUROC of the outside kinds that decide (not NEAR_KINDS); None when it was not measured."""
        deciding = [v for k, v in self.separation.items() if k not in NEAR_KINDS]
        return float(min(deciding)) if deciding else None

    @property
    def separates(self) -> bool | None:
        """Whether the score tells the training data from outside images well enough to say so; None: unmeasured."""
        return None if self.auroc is None else self.auroc >= MIN_AUROC

    def scores(self, features: np.ndarray, cancel=None) -> np.ndarray:
        """(n,) distance from each row of `features` (n, D) to its k-th nearest bank row (both normalised)."""
        return knn_distance(self.features, features, self.k, cancel=cancel)


@dataclass(frozen=True)
class OODScores:
    """Scores and flags of n images; `calibrated` False when the model has no bank (then nothing is flagged)."""

    scores: np.ndarray  # (n,) float32, higher = less like the training data
    flagged: np.ndarray  # (n,) bool
    calibrated: bool
    description: str = ""
    auroc: float | None = None  # how well the score separates (OODBank.auroc); below MIN_AUROC nothing is flagged


def normalise(features: np.ndarray) -> np.ndarray:
    features = np.asarray(features, np.float32)
    return features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)


# Near neighbours have a·b within 1e-5 of 1, where sqrt(2 - 2 a·b) cancels away float32's digits (21 % error at
# distance 0.02; one ulp of the batch-dependent matrix product moved a score by 0.24 % between one process and two).
# The product only ranks the bank; the distances to the best few are computed from the differences themselves.
SPARE_CANDIDATES = 8  # bank rows ranked past the k-th whose exact distance is checked too (near-ties in a·b)
BLOCK_QUERIES = 1024  # queries per block (at most; fewer where the bank is large): the cancel token is checked between


def knn_distance(bank: np.ndarray, features: np.ndarray, k: int, skip_self: bool = False,
                 cancel=None) -> np.ndarray:
    """(n,) Euclidean distance between each normalised query and its k-th nearest bank row. One matrix product
    ranks the bank (for unit vectors ‖a − b‖² = 2 − 2 a·b); the exact ‖a − b‖ of the best k + a few candidates
    picks the k-th. `skip_self`: the queries are the bank's rows. `cancel` (a CancelToken) is checked between
    blocks of queries: 100k images take seconds, and a closed window must not wait for them."""
    bank = np.asarray(bank, np.float32)
    queries = normalise(features)
    kth = min(k + int(skip_self), len(bank))
    spare = min(kth + SPARE_CANDIDATES, len(bank))
    out = np.empty(len(queries), np.float32)
    step = max(1, min(BLOCK_QUERIES, 2 ** 24 // max(1, spare * bank.shape[1])))  # bounded memory for the differences
    for start in range(0, len(queries), step):
        if cancel is not None:
            cancel.raise_if_cancelled()
        out[start:start + step] = _kth_distances(queries[start:start + step], bank, kth, spare)
    return out


def _kth_distances(chunk: np.ndarray, bank: np.ndarray, kth: int, spare: int) -> np.ndarray:
    """(b,) one block of `knn_distance`: the bank ranked by the product, the best `spare` measured exactly (found
    by torch's top-k: numpy's argpartition of the (b × bank) block took 3× as long, most of a folder's score)."""
    import torch  # loaded with the model already

    sims = chunk @ bank.T  # (b, bank)
    best = torch.from_numpy(sims).topk(spare, 1, sorted=False).indices.numpy() if spare < len(bank) else \
        np.broadcast_to(np.arange(len(bank)), sims.shape)
    exact = np.sqrt(np.square(chunk[:, None, :] - bank[best]).sum(axis=2))  # (b, spare)
    return np.partition(exact, kth - 1, axis=1)[:, kth - 1]


def fit_bank(train_features: np.ndarray, held_out_features: np.ndarray, description: str, k: int | None = None,
             max_rows: int = MAX_BANK_ROWS, seed: int = 0) -> OODBank:
    """A bank of (at most `max_rows`, drawn at random) training features, thresholded at the 95th percentile of
    the held-out images' scores. Without held-out images, the training rows are scored against the others."""
    train = normalise(train_features)
    if len(train) == 0:
        raise ValueError("No training features to build the out-of-distribution bank from.")
    if len(train) > max_rows:
        train = train[np.random.default_rng(seed).choice(len(train), max_rows, replace=False)]
    k = k or max(1, round(len(train) / ROWS_PER_NEIGHBOUR))
    k = max(1, min(k, len(train) - 1 if len(held_out_features) == 0 else len(train)))
    bank = train.astype(np.float16)
    if len(held_out_features):
        held = knn_distance(bank, held_out_features, k)
    else:  # leave-one-out: each row's k-th neighbour among the others
        held = knn_distance(bank, bank, k, skip_self=True)
    return OODBank(bank, float(np.quantile(held, ID_QUANTILE)), k, description)


def save_bank(folder: str | Path, bank: OODBank) -> Path:
    from safetensors.numpy import save

    from vitstudio.core.files import atomic_write_bytes

    meta = {"threshold": repr(bank.threshold), "k": str(bank.k), "description": bank.description,
            "method": "knn-distance on L2-normalised pooled features (Sun et al. 2022)",
            "separation": json.dumps(bank.separation)}
    path = Path(folder) / BANK_FILE
    atomic_write_bytes(path, save({"features": np.ascontiguousarray(bank.features)}, metadata=meta))
    return path


def read_bank(folder: str | Path) -> OODBank | None:
    """The bank saved in `folder`, or None when it has none (or an unreadable one: then scores are uncalibrated)."""
    path = Path(folder) / BANK_FILE
    if not path.is_file():
        return None
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            meta = fh.metadata() or {}
            features = fh.get_tensor("features")
        separation = {str(k): float(v) for k, v in json.loads(meta.get("separation") or "{}").items()}
        return OODBank(features.astype(np.float16), float(meta["threshold"]), int(meta["k"]),
                       meta.get("description", ""), separation)
    except (OSError, KeyError, ValueError, RuntimeError, AttributeError, SafetensorError):
        return None


_banks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_banks_guard = threading.Lock()  # classify and folder jobs ask from their own threads


def bank_for(loaded: LoadedModel) -> OODBank | None:
    """The bank beside the model's weights (a run folder, the demo model), read once per loaded model; None for
    models without one and for banks whose width is not the model's."""
    with _banks_guard:
        if loaded in _banks:
            return _banks[loaded]
    bank = None
    for folder in _model_folders(loaded):
        bank = read_bank(folder)
        if bank is not None:
            break
    width = getattr(loaded.model, "num_features", None)
    if bank is not None and width is not None and bank.features.shape[1] != width:
        bank = None  # a bank of another model copied beside these weights
    with _banks_guard:
        _banks[loaded] = bank
    return bank


def _model_folders(loaded: LoadedModel) -> list[Path]:
    from vitstudio.core.models.loading import local_folder

    folders = []
    folder = local_folder(loaded.name)
    if folder is not None:
        folders.append(folder)
    source = Path(loaded.weights_source)
    if source.is_file():  # a weights file given with --weights, or a seed checkpoint: its folder
        folders.append(source.parent)
    elif source.is_dir():
        folders.append(source)
    return folders


def score(loaded: LoadedModel, features: np.ndarray | None, probs: np.ndarray, cancel=None) -> OODScores:
    """Scores of images from their pooled features (n, D) and class probabilities (n, C): kNN against the model's
    bank when it has one, else the uncalibrated 1 − max softmax probability. `cancel`: see knn_distance."""
    bank = bank_for(loaded)
    if bank is not None and features is not None:
        scores = bank.scores(features, cancel)
        flagged = scores > bank.threshold if bank.separates is not False else np.zeros(len(scores), bool)
        return OODScores(scores, flagged, True, bank.description, bank.auroc)
    scores = (1.0 - np.asarray(probs, np.float32).max(axis=1)).astype(np.float32)
    return OODScores(scores, np.zeros(len(scores), bool), False)


def verdict(calibrated: bool, flagged: bool, auroc: float | None) -> str:
    """'uncalibrated' (no bank), 'cannot tell' (a bank whose score does not separate), 'unlike' or 'like'."""
    if not calibrated:
        return "uncalibrated"
    if auroc is not None and auroc < MIN_AUROC:
        return "cannot tell"
    return "unlike" if flagged else "like"


def why_cannot_tell(auroc: float) -> str:
    """Why a calibrated score gives no verdict, in words."""
    return (f"on its validation images the score tells them from outside images (noise, flat frames, digits, "
            f"colour-shifted copies) only at AUROC {auroc:.2f}, under {MIN_AUROC}")


def describe(loaded: LoadedModel) -> str:
    """What the model was trained on, in words, when its bank says (else '')."""
    bank = bank_for(loaded)
    return bank.description if bank is not None else ""


def name_classes(classes: Sequence[str], most: int = 6) -> str:
    """'0–9' for consecutive numbers, 'ants, bees' for a few names, the first ones and a count for many."""
    names = [shown_path(str(c)) for c in classes]  # a class folder named in bytes that are not UTF-8: as \xNN
    if len(names) > 2 and all(n.isdigit() for n in names):
        numbers = sorted(int(n) for n in names)
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{numbers[0]}–{numbers[-1]}"
    if len(names) <= most:
        return ", ".join(names)
    return f"{', '.join(names[:most - 1])} and {len(names) - most + 1} more classes"
