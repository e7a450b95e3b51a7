"""Does the model fit this folder? Its images' out-of-distribution flags (from the features the scan cached, no
second forward) and whether the class folders' names are the model's classes at all, said in words."""

from __future__ import annotations

from dataclasses import dataclass

from vitstudio.core.folder.embedcache import FolderEmbeddings
from vitstudio.core.folder.results import FolderResults, folder_results
from vitstudio.core.models import fit_words, ood
from vitstudio.core.models.model import LoadedModel


@dataclass(frozen=True)
class FolderFit:
    scores: ood.OODScores  # per row of the folder's results
    description: str  # what the model was trained on ('' when unknown)
    folders: tuple[str, ...]  # the class folders' names (images given one by one have none)
    unknown: tuple[str, ...]  # the folders whose name is not one of the model's classes
    labels: tuple[str, ...]  # the model's classes

    @property
    def flagged(self) -> int:
        return int(self.scores.flagged.sum())

    @property
    def total(self) -> int:
        """Images with a calibrated score (none when the model has no record of its training data)."""
        return len(self.scores.flagged) if self.scores.calibrated else 0

    @property
    def most_flagged(self) -> bool:
        return fit_words.most_flagged(self.flagged, self.total)

    @property
    def none_known(self) -> bool:
        """No class folder is named after one of the model's classes."""
        return bool(self.unknown) and len(self.unknown) == len(self.folders)

    def unlike(self) -> str | None:
        """The banner's sentence when most of the images are unlike the model's training data, else None."""
        return fit_words.unlike_sentence(self.flagged, self.total, self.description) if self.most_flagged else None

    def mismatch(self) -> str | None:
        """Why the folder names cannot be compared with the predictions, or None when they can."""
        if not self.unknown:
            return None
        return fit_words.not_its_classes(ood.name_classes(self.unknown), ood.name_classes(self.labels),
                                         self.none_known)

    def warnings(self) -> list[str]:
        """Each way the model does not fit the folder, a sentence each (none when it fits)."""
        return [line for line in (self.unlike(), self.mismatch()) if line]

    def to_dict(self) -> dict:
        """For a command's JSON: how many images were scored and flagged, the folders that are not the model's
        classes, and the warnings in words."""
        return {"images_scored": self.total, "images_unlike": self.flagged, "most_unlike": self.most_flagged,
                "folders_not_classes": list(self.unknown), "warnings": self.warnings()}


def folder_fit(loaded: LoadedModel, embedded: FolderEmbeddings, results: FolderResults, cancel=None) -> FolderFit:
    """The fit of `results` (rows in `embedded`'s order) to the model that made them; `cancel` (a CancelToken)
    stops it between blocks of images."""
    return _fit(loaded, embedded, results.given, results.labels, cancel)


def _fit(loaded, embedded, given, labels, cancel=None) -> FolderFit:
    scores = ood.score(loaded, embedded.features_of(), embedded.probabilities(), cancel)
    folders = tuple(sorted({g for g in given if g}))
    known = set(labels)
    return FolderFit(scores, ood.describe(loaded), folders, tuple(f for f in folders if f not in known),
                     tuple(labels))


def fit_of(loaded: LoadedModel, embedded: FolderEmbeddings, roots: list[str] | None = None,
           given: dict[str, str] | None = None) -> FolderFit | None:
    """The fit of the images embedded from `roots` (their class folders under them, as the Folder tab reads them;
    or `given`: path -> class, a dataset's labels), or None for a model without classes or no image read."""
    if not embedded.labels or not embedded.paths:
        return None
    names = [given.get(p, "") for p in embedded.paths] if given is not None else \
        folder_results(embedded, roots).given
    return _fit(loaded, embedded, names, embedded.labels)
