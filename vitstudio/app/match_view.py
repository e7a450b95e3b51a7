"""Compare → Match, Qt-free: click a point on image A, see how similar that patch is to every patch of
image B, its best match marked, and the mutual nearest neighbours of the two images as a "matches" overlay — from
one block's patch features in one facet (its output tokens, or its attention's keys or queries, as Amir et al.
compare), the core's `dense.matching`, the same numbers as `vitstudio match A B --points x,y --layer L --facet F`.

A is the strip's selected image (its uid, the explorers' context), B a file chosen from the strip or opened (its
path). Two requests, each keyed by the model, A, B, the block and the facet: "features" (both images' patch
features, crops and every mutual match, one forward) and "point" (the clicked point's similarity map and best match,
computed from the features, so a click costs no forward). The point is in A's own pixels, so it survives another
block, facet or model and goes with another A.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vitstudio.core.dense.settings import FACETS
from vitstudio.core.fields import OPACITY, Range

from .evented import Event, EventedModel, Field, ViewState
from .jobs import KeyedJobs

SLOTS = {"features": ("other", "block", "facet"), "point": ("other", "block", "facet", "point", "refine")}
MAX_TOP = 50  # the most mutual matches drawn


class MatchState(ViewState):
    model: int | None = None
    image: int | None = None  # A: the strip's selected image
    other: str | None = None  # B: the path of an image of the strip or a file opened
    block: int = Field(0, range=Range(0, 0), help="the block whose patch features are compared (the last by "
                                                   "default); the range follows the model's depth")
    facet: str = Field(FACETS[0], choices=FACETS, help="the block's output tokens, or its attention's keys or "
                                                       "queries (Amir et al.'s facets)")
    point: tuple | None = None  # (x, y) in A's pixels
    top: int = Field(10, range=Range(0, MAX_TOP), help="mutual nearest neighbours drawn, most similar first; 0: none")
    refine: bool = Field(False, help="sub-patch precision: the most similar pixel around the best patch, the "
                                     "features interpolated between patch centres (vitstudio match --refine)")
    opacity: int = Field(60, range=OPACITY, help="the similarity map's opacity over B, % (0: B's photo alone)")


@dataclass(frozen=True)
class MatchFeatures:
    """Both images as the model sees them: their crops, patch features (`Placed`) and every mutual match."""

    crops: tuple[np.ndarray, np.ndarray]  # (H, W, 3) uint8 each
    placed: tuple[Any, Any]  # core.dense.matching.Placed of A and of B
    mutual: list[dict]  # {"a": [x, y], "b": [x, y], "similarity"}, most similar first (images' pixels)
    sizes: tuple[tuple[int, int], tuple[int, int]]  # (width, height) of A and of B, in their own pixels


@dataclass(frozen=True)
class PointMatch:
    """One point of A found in B."""

    patch: tuple[int, int]  # (row, col) of A's patch under the point
    similarity: np.ndarray  # (gh, gw) cosine of that patch to every patch of B
    best: tuple[float, float]  # (x, y) in B's pixels: the best patch's centre, or the best pixel when refined
    best_patch: tuple[int, int]
    value: float  # its similarity


def features_job(cancel, loaded, image_a, path_b: str, block: int, facet: str) -> MatchFeatures:
    from vitstudio.core.data.images import read_image
    from vitstudio.core.dense.matching import facet_features, mutual_matches

    image_b = read_image(path_b)
    placed = facet_features(loaded, [image_a, image_b], block, facet)
    cancel.raise_if_cancelled()
    crops = tuple(np.asarray(loaded.crop(im).convert("RGB")) for im in (image_a, image_b))
    return MatchFeatures(crops, tuple(placed), mutual_matches(*placed, top=MAX_TOP), (image_a.size, image_b.size))


def point_job(cancel, features: MatchFeatures, point: tuple[float, float], refine: bool) -> PointMatch:
    from vitstudio.core.dense.matching import best_match, refined_match, similarity_map

    a, b = features.placed
    patch = a.to_patch(*point)
    sim = similarity_map(a, b, patch)
    best, value = refined_match(a, b, a.to_crop(*point), sim) if refine else best_match(sim, b)
    best_patch = np.unravel_index(int(np.argmax(sim)), sim.shape)
    return PointMatch(patch, sim, best, (int(best_patch[0]), int(best_patch[1])), value)


class MatchModel(EventedModel):
    """The Match page's model: its state, its two requests and the line it says. The face calls `refresh()` when
    the page is on screen (a hidden page computes nothing) and draws on `changed`."""

    changed = Event("something to draw again")

    def __init__(self, runner) -> None:
        self.state = MatchState()
        self.jobs = KeyedJobs(self.state, SLOTS, runner)
        self.loaded = None  # the LoadedModel
        self.image_a = None  # A's PIL image
        self.path_a: str | None = None
        self.active = False  # the face's page is on screen: a hidden page asks for nothing
        self.state.connect(self._on_change)

    # -- inputs ------------------------------------------------------------------------------------------------
    def set_model(self, loaded) -> None:
        """Another model: its blocks (the last one chosen, the core's default); results of the old one drop."""
        self.loaded = loaded
        with self.state.batch():
            self.state.redeclare("block", range=Range(0, max(0, loaded.token_depth - 1)))
            self.state.update(model=loaded.uid, block=max(0, loaded.token_depth - 1))

    def set_a(self, entry) -> None:
        """A: the strip's selected image (an ImageEntry, or None); a point of the previous A means nothing here."""
        self.image_a = entry.image if entry is not None and entry.error is None else None
        self.path_a = entry.path if self.image_a is not None else None
        self.state.update(image=entry.uid if self.image_a is not None else None, point=None)

    def set_b(self, path: str | None) -> None:
        self.state.update(other=path)

    def click(self, x: float, y: float) -> None:
        """A point of A, in its pixels."""
        self.state.update(point=(float(x), float(y)))

    def click_crop(self, u: float, v: float) -> None:
        """A point of the crop the model sees (what A's view shows: u right, v down, in its pixels)."""
        features = self.features
        if features is not None:
            self.click(*features.placed[0].to_image(u, v))

    # -- results -----------------------------------------------------------------------------------------------
    @property
    def features(self) -> MatchFeatures | None:
        return self.jobs.current("features")

    @property
    def match(self) -> PointMatch | None:
        return self.jobs.current("point")

    def mutual(self) -> list[dict]:
        """The top N mutual matches (the state's `top`), or none before the features."""
        features = self.features
        return [] if features is None else features.mutual[:self.state.top]

    def ready(self) -> bool:
        s = self.state
        return self.loaded is not None and s.model == self.loaded.uid and self.image_a is not None and bool(s.other)

    def refresh(self) -> None:
        """Ask for what the state needs and is not there (nothing twice: a failed request is said, not retried)."""
        if not (self.active and self.ready()):
            return
        s, jobs = self.state, self.jobs
        if self.features is None:
            if not jobs.running("features") and jobs.failed("features") is None:
                jobs.start("features", "Match: patch features", features_job, self.loaded, self.image_a, s.other,
                           s.block, s.facet, on_result=self._on_result, on_error=self._on_result)
            return
        if s.point is not None and self.match is None and not jobs.running("point") and jobs.failed("point") is None:
            jobs.start("point", "Match: a point", point_job, self.features, s.point, s.refine,
                       on_result=self._on_result, on_error=self._on_result)

    def _on_result(self, _value) -> None:
        self.changed.emit()
        self.refresh()

    def _on_change(self, name: str, _value) -> None:
        if name not in ("top", "opacity"):  # they only draw what is there
            self.refresh()
        self.changed.emit()

    def titles(self) -> tuple[str, str]:
        """What the page writes above A and B: their names and, once a point is matched, both points in their images'
        own pixels (above the views, in sight when a short window scrolls the line under them out)."""
        s, features, match = self.state, self.features, self.match
        a = "A: the strip's selected image" if self.path_a is None else f"A: {Path(self.path_a).name}"
        b = "B" if not s.other else f"B: {Path(s.other).name}"
        if features is None:
            return a, b
        if match is None:
            return a + " — click a point", b
        (x, y), (bx, by) = s.point, match.best
        return (f"{a} — point at x {x:.0f}, y {y:.0f}",
                f"{b} — best match at x {bx:.0f}, y {by:.0f}, similarity {match.value:.3f}")

    def line(self) -> str:
        """What the page says: what is missing, what is under way, why it failed, or the match."""
        s, jobs = self.state, self.jobs
        if self.loaded is None:
            return "Load a model to match points between two images."
        if self.image_a is None:
            return "Select an image in the strip: it is A, the image you click on."
        if not s.other:
            return "Choose image B from the strip or open a file."
        failed = jobs.failed("features") or jobs.failed("point")
        if failed is not None:
            return f"Cannot match: {failed}"
        if self.features is None:
            return f"Reading block {s.block}'s {s.facet} features of both images…"
        match = self.match
        if match is None:
            return (f"Click a point on A: its patch's cosine similarity to every patch of B (block {s.block}, "
                    f"{s.facet}); {len(self.features.mutual)} mutual nearest neighbours.")
        (x, y), (bx, by) = s.point, match.best
        (wa, ha), (wb, hb) = self.features.sizes  # the points are in these pixels, not the crops'
        return (f"A at x {x:.0f}, y {y:.0f} (of {wa}×{ha} px) → best match in B at x {bx:.0f}, y {by:.0f} (of "
                f"{wb}×{hb} px), similarity {match.value:.3f} (block {s.block}, {s.facet}; "
                f"{len(self.features.mutual)} mutual nearest neighbours).")
