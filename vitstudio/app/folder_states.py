"""The Folder tab's states, Qt-free: the folder opened and its filters (each a field with its range or choices: the
predicted classes offered are declared from each folder's results), and the states of its Layers and Concepts
pages. Filters are saved, restored and reset as data; a page's results are keyed by the model (and folder) they
are of, so a switch drops them."""

from __future__ import annotations

from vitstudio.core.fields import Range
from vitstudio.core.folder.score_names import NAMES

from .evented import Field, ViewState

ALL_CLASSES = ((None,), ("all classes",))  # the Predicted filter's choice before any results: no filter
ALL_TAGS = ((None,), ("any tags",))  # the Tag filter's choice before any tag: no filter
COLOUR_BY = ("prediction", "given label", "correct", "confidence", "tag", *NAMES)  # the map's colours; the brain's
# scores last
SORTS = ("how often it fires", "on how many images", "mean activation")  # the concept table's orders, then classes


class FolderState(ViewState):
    """The Folder tab: the model and the paths its results are for, the table's filters, the map's colouring."""

    model: int | None = None
    paths: tuple = ()
    predicted: str | None = Field(None, choices=ALL_CLASSES[0], labels=ALL_CLASSES[1],
                                  help="a predicted class shown in the table")
    min_conf: float = Field(0.0, range=Range(0.0, 1.0), help="0 ≤ confidence ≤ 1")
    correct: bool | None = None  # None: all images; True: correct ones; False: mistakes
    follow_map: bool = False
    colour_by: str = Field(COLOUR_BY[0], choices=COLOUR_BY)  # the map's colours
    tag: str | None = Field(None, choices=ALL_TAGS[0], labels=ALL_TAGS[1], help="a tag the images shown carry")
    rules: tuple = ()  # a restored view's rules the fields above cannot hold (core/folder/views.py): all must hold
    lasso: bool = False  # a drag on the map draws an outline that selects (else it pans the map)
    gallery: bool = False  # the folder shown as a grid of thumbnails instead of the table


def offered_classes(classes) -> dict:
    """The Predicted filter's spec for results predicting `classes`: all of them, or one."""
    return dict(choices=ALL_CLASSES[0] + tuple(classes), labels=ALL_CLASSES[1] + tuple(classes))


FILTER_DEFAULTS = {name: FolderState().fields()[name].default
                   for name in ("predicted", "min_conf", "correct", "follow_map", "tag", "rules")}


class LayersState(ViewState):
    """The Layers page: the model and the folder the probes are for (a switch of either drops what is shown)."""

    CONTEXT = ("model",)
    model: int | None = None
    folder: str | None = None


class ConceptsState(ViewState):
    """The Concepts page: the model and folder the concepts are learned on, the file shown, the concept chosen."""

    CONTEXT = ("model",)
    model: int | None = None
    folder: str | None = None
    file: str | None = None
    concept: int = 0
    picked: bool = False  # the user chose the concept (Browse, a list): until then the image's strongest is shown
    sort: int = Field(0, choices=tuple(range(len(SORTS))), labels=SORTS)  # the table's order (`sorts_for`)


def sorts_for(classes) -> dict:
    """The concept table's orders for concepts learned on a folder of `classes`: the three, then by each class."""
    labels = (*SORTS, *(f"class: {c}" for c in classes))
    return dict(choices=tuple(range(len(labels))), labels=labels)


class ImageConceptsState(ViewState):
    """Concepts → On the image: the image read through the concepts, and what the "after" prediction changes."""

    model: int | None = None
    image: int | None = None  # the strip's image (its uid), when no row of the folder is selected
    path: str | None = None  # the folder's row selected (its file): the Folder tab's current image wins
    file: str | None = None
    scales: tuple = ()  # ((concept, factor),): what the "after" prediction switches off or scales
    patch: tuple | None = None
    off: bool = False  # the chosen concept switched off for the "after" prediction ...
    scale: float = Field(1.0, range=Range(0.0, 10.0), help="the chosen concept scaled at its block (1: unchanged)")

    def factors(self, concept: int) -> tuple:
        """((concept, factor),) for the "after" prediction, or () when nothing changes."""
        factor = 0.0 if self.off else round(self.scale, 4)
        return () if factor == 1.0 else ((concept, factor),)
