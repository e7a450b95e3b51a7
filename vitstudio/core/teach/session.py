"""Teaching a head on a project: every sample's features once (the folder-embedding cache, keyed by content and
model: a refit after adding ten samples computes ten), Teachable Machine's 15 % per-class split, the head fitted by
the chosen recipe, and what the app then shows: each sample's probabilities, per-class validation accuracy, the
confusion matrix and the samples it gets wrong. A refit is `fit_features` alone: no forward, the head only."""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, replace

import numpy as np
from torch import nn

from vitstudio.core.folder.embedcache import embed_folder, head_on_pooled
from vitstudio.core.jobs import CancelToken, Progress
from vitstudio.core.models.model import LoadedModel
from vitstudio.core.teach.augment import augmenter
from vitstudio.core.teach.heads import FITTERS, FittedHead
from vitstudio.core.teach.project import ProjectError, TeachProject, recordings
from vitstudio.core.teach.split import MIN_HELD_OUT, TeachSplit, sample_groups, teachable_split
from vitstudio.core.teach.words import WordsHead, words_head
from vitstudio.core.train.quick import classifier_input


@dataclass(frozen=True)
class TeachFeatures:
    """What a head is fitted on: the classifier's input for every readable sample, in the project's order."""

    classes: tuple[str, ...]
    paths: tuple[str, ...]
    labels: np.ndarray  # (N,) int64 class indices
    features: np.ndarray  # (N, D) float32: what the model's final Linear reads
    errors: tuple[tuple[str, str], ...] = ()  # samples that could not be read, with why
    computed: int = 0  # samples run through the model this time (the rest came from the cache)
    groups: np.ndarray | None = None  # (N,) int64: one recording or near-duplicates (split.sample_groups); None: none


@dataclass(frozen=True)
class TeachResult:
    classes: tuple[str, ...]
    paths: tuple[str, ...]
    labels: np.ndarray  # (N,)
    split: TeachSplit
    head: FittedHead
    probabilities: np.ndarray  # (N, C) float32: the app's prediction for every sample (what export must match)
    fit_seconds: float
    words_accuracy: float | None = None  # the card names' zero-shot head on the same held-out samples (CLIP-style)

    @property
    def confusion(self) -> np.ndarray:
        """(C, C) int64 on the validation samples: rows the true class, columns the predicted one."""
        matrix = np.zeros((len(self.classes),) * 2, np.int64)
        np.add.at(matrix, (self.labels[self.split.val], self.predicted[self.split.val]), 1)
        return matrix

    @property
    def predicted(self) -> np.ndarray:
        return self.probabilities.argmax(1)

    def per_class_accuracy(self) -> dict[str, float | None]:
        """Validation accuracy of each class (its held-out samples predicted as it); None: none held out."""
        matrix = self.confusion
        return {name: float(matrix[i, i] / matrix[i].sum()) if matrix[i].sum() else None
                for i, name in enumerate(self.classes)}

    def validation_note(self) -> str:
        """'' when every class holds out enough samples for its accuracy to mean something, else one line saying
        which do not: none held out (all its samples are one recording or near-copies of each other), or fewer than
        MIN_HELD_OUT (2 held out can only score 0, 50 or 100 %)."""
        held = self.held_out()
        none = [c for c, n in held.items() if n == 0]
        few = {c: n for c, n in held.items() if 0 < n < MIN_HELD_OUT}
        said = []
        if none:
            said.append(f"nothing of {', '.join(none)} could be held out (its samples are one recording or "
                        f"near-copies of each other: record it again, in another hold)")
        if few:
            said.append(f"validation holds {', '.join(f'{n} of {c}' for c, n in few.items())}: too few for the "
                        f"accuracy to mean much (fewer than {MIN_HELD_OUT} per class; add samples from more "
                        f"recordings)")
        return "; ".join(said)

    def held_out(self) -> dict[str, int]:
        """Validation samples per class."""
        counts = np.bincount(self.labels[self.split.val], minlength=len(self.classes))
        return {name: int(n) for name, n in zip(self.classes, counts)}

    @property
    def val_accuracy(self) -> float:
        val = self.split.val
        return float((self.predicted[val] == self.labels[val]).mean()) if len(val) else float("nan")

    def record_next(self) -> tuple[str, str] | None:
        """What to record more of: (the class with the lowest validation accuracy, the class its held-out samples
        are most often taken for), or None when every held-out sample is right."""
        matrix = self.confusion
        wrong = matrix - np.diag(np.diag(matrix))
        if not wrong.any():
            return None
        accuracy = self.per_class_accuracy()
        weakest = min((i for i in range(len(self.classes)) if accuracy[self.classes[i]] is not None),
                      key=lambda i: (accuracy[self.classes[i]], -wrong[i].sum()))
        return self.classes[weakest], self.classes[int(wrong[weakest].argmax())]

    def cell_paths(self, true: int, predicted: int) -> list[str]:
        """The validation samples behind confusion cell (true, predicted): a cell opened shows its images."""
        val = self.split.val
        return [self.paths[i] for i in val if self.labels[i] == true and self.predicted[i] == predicted]

    def wrong(self) -> list[tuple[str, str, str]]:
        """(path, true class, predicted class) of each validation sample the head gets wrong."""
        return [(self.paths[i], self.classes[self.labels[i]], self.classes[self.predicted[i]])
                for i in self.split.val if self.predicted[i] != self.labels[i]]


def check_teachable(loaded: LoadedModel) -> None:
    """A ValueError (one line) for a model whose logits are not one Linear on its pooled features: the head taught
    here replaces that Linear, and the export must compute exactly what the app computed."""
    model = loaded.model
    if isinstance(getattr(model, "head_dist", None), nn.Linear):
        raise ValueError(f"{loaded.display_name} has a distillation head (two heads); teach fits one linear head: "
                         f"use `vitstudio finetune --preset linear-probe`.")
    if head_on_pooled(model) is None:
        raise ValueError(f"{loaded.display_name}'s logits are not a head on its pooled features (timm's plain "
                         f"forward_head), which teach replaces: use `vitstudio finetune --preset linear-probe`.")


def project_features(loaded: LoadedModel, project: TeachProject, batch_size: int = 32,
                     cancel: CancelToken | None = None) -> Generator[Progress, None, TeachFeatures]:
    """Generator: Progress while samples are embedded; returns TeachFeatures (from the cache where unchanged)."""
    check_teachable(loaded)
    project.check_trainable()
    labelled = project.labelled()
    embedded = yield from embed_folder(loaded, [str(p) for p, _ in labelled], batch_size, cancel)
    row_of = {p: i for i, p in enumerate(embedded.paths)}
    kept = [(row_of[str(p)], str(p), label) for p, label in labelled if str(p) in row_of]
    rows = np.asarray([r for r, _, _ in kept], np.int64)
    features = classifier_input(loaded.model, embedded.features_of(rows))
    paths = tuple(p for _, p, _ in kept)
    groups = sample_groups(list(paths), recordings(project.root))  # held out together, never apart
    return TeachFeatures(project.classes, paths, np.asarray([label for _, _, label in kept], np.int64), features,
                         embedded.errors, embedded.computed, groups)


def fit_features(features: TeachFeatures, recipe: str = "quick", seed: int = 0, cancel: CancelToken | None = None,
                 augment=None) -> TeachResult:
    """The refit: split, fit on the training share (and, with `augment` (augment.augmenter), its augmented views'
    features), every sample's probabilities under the new head."""
    counts = np.bincount(features.labels, minlength=len(features.classes))
    short = [name for name, n in zip(features.classes, counts) if n < 2]
    if short:  # unreadable samples can leave a class short even when its folder was not
        raise ProjectError(f"class {', '.join(short)} has fewer than two readable samples: add more.")
    split = teachable_split(features.labels, seed, features.groups)
    started = time.perf_counter()
    x, y = features.features[split.train], features.labels[split.train]
    if augment is not None:
        views, view_labels = augment(split.train)
        x, y = np.concatenate([x, views]), np.concatenate([y, view_labels])
    head = FITTERS[recipe](x, y, len(features.classes), cancel=cancel)
    seconds = time.perf_counter() - started
    return TeachResult(features.classes, features.paths, features.labels, split, head,
                       head.probabilities(features.features), seconds)


def image_features(loaded: LoadedModel, images: list) -> np.ndarray:
    """(n, D) what a head reads for PIL images (a preview frame): the model's own eval transform and pooled features,
    the same path as the cached features the head was fitted on."""
    import torch

    from vitstudio.core.models.devices import to_device

    batch = torch.stack([loaded.transform(image.convert("RGB")) for image in images])
    model = loaded.model
    with loaded.lock, torch.inference_mode(), loaded.autocast():  # as pooled_features, without the model's logits
        pooled = model.forward_head(model.forward_features(to_device(batch, loaded.device)), pre_logits=True)
    return classifier_input(model, pooled.float().cpu().numpy())


def image_probabilities(loaded: LoadedModel, head, images: list) -> np.ndarray:
    """(n, C) probabilities of `head` (a FittedHead or a WordsHead) on PIL images."""
    return head.probabilities(image_features(loaded, images))


def refit(loaded: LoadedModel, project: TeachProject, recipe: str | None = None, cancel: CancelToken | None = None
          ) -> Generator[Progress, None, TeachResult | WordsHead]:
    """The Teach tab's refit after a change: the fitted head (a TeachResult) once every class has two readable
    samples, with the zero-shot head's accuracy on the same held-out samples beside it (the prior it replaces);
    before that, for a model with a text tower, the zero-shot head of the card names (words.py); otherwise the
    ProjectError saying what is missing."""
    try:
        features = yield from project_features(loaded, project, cancel=cancel)
        result = fit_project(loaded, project, features, recipe, cancel)
        words = words_head(loaded, features.classes)
        if words is None:
            return result
        val = result.split.val
        right = words.probabilities(features.features[val]).argmax(1) == features.labels[val]
        return replace(result, words_accuracy=float(right.mean()) if len(val) else None)
    except ProjectError:
        start = words_head(loaded, project.classes)
        if start is None:
            raise
        return start


def teach(loaded: LoadedModel, project: TeachProject, recipe: str | None = None, batch_size: int = 32,
          cancel: CancelToken | None = None) -> Generator[Progress, None, tuple[TeachFeatures, TeachResult]]:
    """Generator: features (Progress), then the head; returns (the features, the result)."""
    features = yield from project_features(loaded, project, batch_size, cancel)
    yield Progress(0, 0, f"Fitting the {recipe or project.settings.recipe} head on {len(features.labels)} samples")
    return features, fit_project(loaded, project, features, recipe, cancel)


def fit_project(loaded: LoadedModel, project: TeachProject, features: TeachFeatures, recipe: str | None = None,
                cancel: CancelToken | None = None) -> TeachResult:
    """fit_features as the project's settings say: its recipe (unless given), split seed and augmentation."""
    settings = project.settings
    augment = augmenter(loaded, features.paths, features.labels, settings.seed) if settings.augment else None
    return fit_features(features, recipe or settings.recipe, settings.seed, cancel, augment)
