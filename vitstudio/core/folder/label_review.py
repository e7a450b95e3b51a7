"""Which images of a labelled folder the model doubts most: out-of-sample probabilities from a k-fold linear probe
on the cached embeddings, scored by cleanlab's label-quality methods (not re-implemented here).

The probe is scikit-learn's logistic regression on the standardised, whitened first principal components of the
features; each image's probabilities come from a probe that never saw it (stratified k-fold), which is what
cleanlab's scores assume.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LabelIssue:
    path: str
    given: str
    suggested: str  # the probe's most likely class
    quality: float  # cleanlab's label-quality score in [0, 1]: low = the given label is doubtful
    p_given: float  # out-of-sample probability of the given label

    def to_dict(self) -> dict:
        return {"path": self.path, "given": self.given, "suggested": self.suggested, "quality": self.quality,
                "p_given": self.p_given}


def out_of_sample_probabilities(features: np.ndarray, labels: np.ndarray, folds: int = 5, seed: int = 0
                                ) -> np.ndarray:
    """(N, classes) probabilities, each row from a probe trained on the other folds."""
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    smallest = int(np.bincount(labels).min())
    folds = max(2, min(folds, smallest))
    # the probe sees the first 64 principal components (whitened): as separable as the full width for a linear
    # probe in practice, and 10-100× faster to fit than 768 raw dimensions
    dims = min(64, features.shape[1], len(features) - len(features) // folds - 1)
    probe = make_pipeline(StandardScaler(), PCA(dims, whiten=True, random_state=seed),
                          LogisticRegression(max_iter=500, C=0.5))
    return cross_val_predict(probe, np.asarray(features, np.float64), labels,
                             cv=StratifiedKFold(folds, shuffle=True, random_state=seed), method="predict_proba")


def review_labels(paths: list[str], features: np.ndarray, labels: np.ndarray, classes: list[str], folds: int = 5,
                  seed: int = 0) -> list[LabelIssue]:
    """Every image ranked from most to least doubtful given label."""
    from cleanlab.rank import get_label_quality_scores

    if len(set(labels.tolist())) < 2 or np.bincount(labels).min() < 2:
        raise ValueError("Label review needs at least two classes with two or more images each.")
    probs = out_of_sample_probabilities(features, labels, folds, seed)
    scores = get_label_quality_scores(labels, probs)
    order = np.argsort(scores, kind="stable")
    return [LabelIssue(paths[i], classes[labels[i]], classes[int(probs[i].argmax())], float(scores[i]),
                       float(probs[i, labels[i]])) for i in order]
