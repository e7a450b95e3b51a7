"""The explorers' states, Qt-free: what each tab shows is keyed by (model, image) and every control's value is a
field here, its range or choices declared (a parameter the analysis registry declares takes the registry's spec).
The panels in gui/explore/ draw them; ranges and class lists that follow the model are redeclared by the panel in
the same update as the model (`ViewState.redeclare` in a batch)."""

from __future__ import annotations

from vitstudio.core.analysis import registry
from vitstudio.core.fields import COLORMAPS, MASS_MASK, OPACITY, SHOWN_DIRECTIONS, Range

from .evented import Field, ViewState

TOP_1, TOP_1_LABEL = (None,), ("top-1 prediction",)  # the target before the model's classes: its top-1 prediction


def registry_fields(methods, declared: dict) -> dict:
    """State fields for the parameters of `methods` that the state does not declare itself: each its Param's spec."""
    out = {}
    for name in methods:
        for p in registry.get(name).params:
            if p.name not in declared and p.name not in out:
                out[p.name] = p.spec
    return out


class ExplorerState(ViewState):
    """What every explorer's view is keyed by: the model and the image it shows (their uids). A panel's own state
    subclasses it with the fields of its controls."""

    model: int | None = None
    image: int | None = None


class AttentionState(ExplorerState):
    """The Attention tab."""

    method: str | None = Field(None, valid=registry.is_registered)
    # ranges and the class list follow the model shown (redeclared with the model's uid)
    layer: int = Field(0, range=Range(0, 0))
    head: int = Field(0, range=Range(0, 0))
    fusion: str = registry.get("rollout").param("fusion").spec
    discard: float = registry.get("rollout").param("discard").spec
    target: int | None = Field(None, choices=TOP_1, labels=TOP_1_LABEL)  # the class explained (None: the top-1)
    patch: tuple | None = None
    direction: str = Field("to", choices=SHOWN_DIRECTIONS, labels=("attends to", "attended by"))
    text: str | None = None  # the text map's text (CLIP-style models)
    cmap: str = Field("inferno", choices=COLORMAPS)
    opacity: int = Field(60, range=OPACITY)
    mask: int = Field(0, range=MASS_MASK, help="share of the map's mass kept, %; 0 = off")
    smooth: bool = True
    folder: str | None = None  # the folder the distance plot averages
    with_register: bool = False  # every map computed with a test-time register on the Registers page's neurons
    registers: object = None  # those neurons (a RegisterNeurons) while with_register is on and a search found some


class EmbeddingsState(ExplorerState):
    mode: str | None = Field(None, valid=registry.is_registered)  # the registered token view (PCA, similarity, …)
    layer: int = Field(0, range=Range(0, 0))  # a token layer: a block, or a Swin stage (the range follows the model)
    patch: tuple | None = None
    fixed: bool = False  # one PCA basis across layers and images
    cmap: str = Field("inferno", choices=COLORMAPS)
    smooth: bool = True


class CompareState(ExplorerState):
    other: int | None = None  # the second model's uid
    other_request: tuple | None = None  # the second model asked for (latest wins)
    method: str | None = Field(None, valid=registry.is_registered)  # first: the first analysis offered in Compare
    cmap: str = Field("inferno", choices=COLORMAPS)
    smooth: bool = True


class LayerCKAState(ViewState):
    """Compare → Layers (CKA): keyed by the model only (the matrix is of a set of images, not the one shown)."""

    CONTEXT = ("model",)
    model: int | None = None
    other: int | None = None  # the second model's uid
    paths: tuple = ()  # the images the matrix is for
    image: int | None = None  # the image the PCA maps show
    cell: tuple | None = None  # (block of the current model, block of the second) clicked


class PlayState(ViewState):
    model: int | None = None
    source: str | None = None  # a video file, or camera:N
    method: str | None = Field(None, valid=registry.is_registered)  # the map drawn on each frame; None: none
    record: str | None = None  # the video file the annotated frames go to: one session's (then disarmed)
