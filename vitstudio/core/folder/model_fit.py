"""Does the model fit this folder? Its images' out-of-distribution flags (from the features the scan cached, no
second forward) and whether the class folders' names are the model's classes at all, said in words."""

from __future__ import annotations

from dataclasses import dataclass

from vitstudio.core.folder.embedcache import FolderEmbeddings
from vitstudio.core.folder.results import FolderResults
from vitstudio.core.models import ood
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
        return self.total > 0 and self.flagged * 2 > self.total

    def mismatch(self) -> str | None:
        """Why the folder names cannot be compared with the predictions, or None when they can."""
        if not self.unknown:
            return None
        if len(self.unknown) == len(self.folders):
            return (f"Your folders ({ood.name_classes(self.unknown)}) are not this model's classes "
                    f"({ood.name_classes(self.labels)}): fine-tune it to learn them. Correct / mistake filters and "
                    f"colours need folders named after the model's classes.")
        return (f"Some of your folders ({ood.name_classes(self.unknown)}) are not this model's classes "
                f"({ood.name_classes(self.labels)}): their images are neither correct nor mistakes; fine-tune the "
                f"model to learn them.")


def folder_fit(loaded: LoadedModel, embedded: FolderEmbeddings, results: FolderResults, cancel=None) -> FolderFit:
    """The fit of `results` (rows in `embedded`'s order) to the model that made them; `cancel` (a CancelToken)
    stops it between blocks of images."""
    scores = ood.score(loaded, embedded.features_of(), embedded.probabilities(), cancel)
    folders = tuple(sorted({g for g in results.given if g}))
    known = set(results.labels)
    return FolderFit(scores, ood.describe(loaded), folders, tuple(f for f in folders if f not in known),
                     tuple(results.labels))
