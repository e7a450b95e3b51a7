"""Which images of a labelled folder the model doubts most: out-of-sample probabilities from a k-fold linear probe
on the cached embeddings, ranked by cleanlab's label-quality score, with cleanlab's estimate of how many labels are
wrong (`find_label_issues`): the first that many of the ranking are flagged. Nothing of cleanlab is re-implemented.

The probe is scikit-learn's logistic regression on the first (at most 64) principal components of the
standardised features; each image's probabilities come from a probe that never saw it (stratified k-fold), which
is what cleanlab's scores assume. Two probes are fitted and their out-of-fold probabilities averaged (a small
ensemble: each is best on some features, the mean is within noise of the better one on every set measured):
- whitened components under a strong L2 penalty (C 0.05): features whose classes differ along low-variance
  directions (e.g. a model that never saw such images) separate only once those are scaled up, and the penalty
  keeps the noise directions whitening also scales up from being fitted (the old probe, whitened at C 0.5, found
  19 of 30 flipped labels where cleanlab's own ranking found 23);
- plain components (C 1): features a trained model already made linearly separable.
Top-30 precision with 30 flipped digits (3 seeds), this / whitened only / plain only / cleanlab's own ranking
(logistic regression on the standardised features): pixels 0.84 / 0.81 / 0.82 / 0.84; the demo model's features
0.99 / 0.99 / 0.98 / 0.98; a random ViT's features 0.77 / 0.78 / 0.61 / 0.61.

cleanlab cannot tell a wrong label from the probe's own mistake: with a weak probe its count is mostly the latter.
The review states the probe's out-of-fold accuracy (overall and per class) and, below `MIN_PROBE_ACCURACY`, that the
count means little (`ProbeAccuracy.caveat`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vitstudio.core.files import shown_path

# Shuffle-label experiments (tests/benchmarks/label_review_noise.py: digits' pixels, 240 two-class photo crops as
# pixels and through the demo model, features degraded with noise, 0-20 % of labels flipped): on clean folders
# cleanlab flagged 0.2-2.2 % of the labels at balanced out-of-fold accuracy ≥ 88 %, 5-15 % at 79-82 %, 12-24 % at
# 70-75 % and 25-31 % at 63-67 %. Once the probe's false flags pass the 5-10 % of wrong labels a folder plausibly
# holds, the count is mostly the probe's mistakes.
MIN_PROBE_ACCURACY = 0.85  # of the balanced (mean per-class) out-of-fold accuracy
# (whiten, C) of the candidate probes; measured on digits with 30 flipped labels (tests/core/test_label_review.py)
PROBES = ((True, 0.05), (False, 1.0))


@dataclass(frozen=True)
class LabelIssue:
    path: str
    given: str
    suggested: str  # the probe's most likely class
    quality: float  # cleanlab's label-quality score in [0, 1]: low = the given label is doubtful
    p_given: float  # out-of-sample probability of the given label
    flagged: bool = False  # among the labels cleanlab estimates to be wrong (the first `estimated_wrong` ranked)

    @property
    def doubtful(self) -> bool:
        """Worth a look: cleanlab flags it, or the probe suggests another class."""
        return self.flagged or self.suggested != self.given

    def to_dict(self) -> dict:
        return {"path": self.path, "given": self.given, "suggested": self.suggested, "quality": self.quality,
                "p_given": self.p_given, "flagged": self.flagged}


def estimated_wrong(issues) -> int:
    """cleanlab's estimate of the number of wrong labels in a review (the flagged issues)."""
    return sum(1 for i in issues if i.flagged)


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"


@dataclass(frozen=True)
class ProbeAccuracy:
    """How often the out-of-fold probe's most likely class is the given label, overall and per given class."""

    overall: float
    per_class: tuple[tuple[str, float, int], ...]  # (class, accuracy on its images, images)

    @property
    def balanced(self) -> float:
        """The mean of the per-class accuracies: a probe that always answers the largest class gets no credit."""
        return float(np.mean([acc for _, acc, _ in self.per_class]))

    @property
    def weak(self) -> bool:
        return self.balanced < MIN_PROBE_ACCURACY

    def describe(self, most: int = 6) -> str:
        """'out-of-fold accuracy 65 % (ants 60 %, bees 70 %)'; with many classes, the weakest ones."""
        shown = self.per_class if len(self.per_class) <= most else sorted(self.per_class, key=lambda c: c[1])[:most]
        parts = ("" if shown is self.per_class else "weakest: ") + ", ".join(f"{shown_path(name)} {_percent(acc)}"
                                                                           for name, acc, _ in shown)
        return f"out-of-fold accuracy {_percent(self.overall)} ({parts})"

    def caveat(self) -> str:
        """Why the count means little ('' when the probe is accurate enough for it)."""
        if not self.weak:
            return ""
        return (f"below {_percent(MIN_PROBE_ACCURACY)} accuracy per class (here {_percent(self.balanced)} on "
                f"average) cleanlab cannot tell wrong labels from the probe's own mistakes (clean folders had 2 % "
                f"flagged at 88 %, 5-15 % at 80 %, 25-31 % at 65 %): read the ranking as the images to look at "
                f"first, not the count")

    def to_dict(self) -> dict:
        return {"accuracy": self.overall, "balanced_accuracy": self.balanced, "min_accuracy": MIN_PROBE_ACCURACY,
                "weak": self.weak, "per_class": [{"class": name, "accuracy": acc, "images": n}
                                                 for name, acc, n in self.per_class]}


def probe_accuracy(issues) -> ProbeAccuracy | None:
    """The out-of-fold probe's accuracy on a review's images (every image is an issue; None for no review)."""
    by_class: dict[str, list[bool]] = {}
    for issue in issues:
        by_class.setdefault(issue.given, []).append(issue.suggested == issue.given)
    if not by_class:
        return None
    hits = [hit for found in by_class.values() for hit in found]
    return ProbeAccuracy(float(np.mean(hits)), tuple((name, float(np.mean(found)), len(found))
                                                     for name, found in sorted(by_class.items())))


def _probe(whiten: bool, c: float, dims: int, seed: int):
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), PCA(dims, whiten=whiten, random_state=seed),
                         LogisticRegression(max_iter=1000, C=c))


def out_of_sample_probabilities(features: np.ndarray, labels: np.ndarray, folds: int = 5, seed: int = 0,
                                probes=PROBES) -> np.ndarray:
    """(N, classes) probabilities, each row from probes trained on the other folds (the mean of the candidates)."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from threadpoolctl import threadpool_limits  # scikit-learn's dependency

    smallest = int(np.bincount(labels).min())
    folds = max(2, min(folds, smallest))
    # at most 64 principal components: as separable as the full width for a linear probe in practice, and
    # 10-100× faster to fit than 768 raw dimensions
    dims = min(64, features.shape[1], len(features) - len(features) // folds - 1)
    # float32 as the features come: half the memory traffic of each loss evaluation (100k images: 2× faster fits;
    # the probabilities move by < 0.01, the digits' review finds the same flipped labels: tests/core/test_label_review)
    x = np.asarray(features, np.float32)
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    # one thread for scikit-learn's OpenMP loss and BLAS (threadpoolctl: OpenMP's limit is this thread's, BLAS's the
    # process's while the fits run):
    # the fits' operations are small, and on a busy 2-core machine waking a second thread for each cost more than
    # the work (10k images: 6.3 s → 1.7 s at load 2, the same probabilities; ~1 s per loss evaluation at load 7)
    with threadpool_limits(1):
        return np.mean([cross_val_predict(_probe(whiten, c, dims, seed), x, labels, cv=cv, method="predict_proba")
                        for whiten, c in probes], axis=0)


def review_labels(paths: list[str], features: np.ndarray, labels: np.ndarray, classes: list[str], folds: int = 5,
                  seed: int = 0) -> list[LabelIssue]:
    """Every image ranked from most to least doubtful given label; the first `estimated_wrong` are flagged."""
    from cleanlab.filter import find_label_issues
    from cleanlab.rank import get_label_quality_scores

    if len(set(labels.tolist())) < 2 or np.bincount(labels).min() < 2:
        raise ValueError("Label review needs at least two classes with two or more images each.")
    probs = out_of_sample_probabilities(features, labels, folds, seed)
    scores = get_label_quality_scores(labels, probs)  # self-confidence: p(given label)
    order = np.argsort(scores, kind="stable")
    # 'low_self_confidence': cleanlab's count of wrong labels (confident joint, calibrated), taken from the lowest
    # self-confidence: the flagged ones are exactly the top of this ranking
    flagged = int(find_label_issues(labels, probs, filter_by="low_self_confidence").sum())
    return [LabelIssue(paths[i], classes[labels[i]], classes[int(probs[i].argmax())], float(scores[i]),
                       float(probs[i, labels[i]]), rank < flagged) for rank, i in enumerate(order)]
