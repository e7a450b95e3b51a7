"""The Paint page's segmentation over another view's image, Qt-free, so that what was painted in the Folder tab is
seen over the image the Attention tab shows: the strip's selected image segmented from the
paint as it is now, by the Paint page's own job (`paint_jobs.current_job`: the same bank and vote), cut to the crop
the model sees so it lies over the tab's map.

Keyed by the model, the image and the paint's revision: a stroke, undo or class rename on the Paint page asks again
(latest wins); another model or image drops the old one at once. Nothing is asked while `shown` is off.
"""

from __future__ import annotations

import numpy as np

from .evented import Event, EventedModel, ViewState
from .jobs import KeyedJobs


class PaintOverlayState(ViewState):
    model: int | None = None
    image: int | None = None  # the strip's selected image (its uid)
    revision: int = 0  # the paint's
    shown: bool = False  # the overlay is asked for (the Attention tab's toggle)


def overlay_job(cancel, loaded, path: str, painted: dict, classes: tuple[str, ...]):
    """(Segmented of the image, (H, W) uint8 class indices of the crop the model sees at its input size)."""
    from PIL import Image

    from .paint_jobs import current_job

    segmented = yield from current_job(cancel, loaded, path, painted, classes)
    top, left, h, w = loaded.crop_box(segmented.labels.shape)
    crop = Image.fromarray(segmented.labels[top:top + h, left:left + w])
    return segmented, np.asarray(crop.resize(loaded.input_hw[::-1], Image.NEAREST))


class PaintOverlay(EventedModel):
    changed = Event("what is shown changed: draw again")

    def __init__(self, page) -> None:
        """`page`: the Folder tab's Paint page (app.paint_page.PaintPageModel): its paint, classes and runner."""
        self.page = page
        self.app = page.folder.app
        self.state = PaintOverlayState(revision=page.state.revision)
        self.jobs = KeyedJobs(self.state, {"overlay": ("revision", "shown")}, page.folder.runner)
        self.entry = None
        self.failed: str = ""
        page.state.events.revision.connect(self._on_revision)
        page.changed.connect(lambda _what: self.refresh())  # another folder empties the paint: the overlay goes
        self.state.events.shown.connect(lambda _on: self.refresh())
        self.app.model_loaded.connect(self._on_model)
        self.app.image_selected.connect(self.follow)
        if self.app.model is not None:
            self._on_model(self.app.model)
        self.follow(self.app.selected)

    def _on_model(self, loaded) -> None:
        self.state.update(model=loaded.uid)
        self.refresh()

    def _on_revision(self, revision: int) -> None:
        self.state.update(revision=revision)
        self.refresh()

    def follow(self, entry) -> None:
        self.entry = entry if entry is not None and entry.error is None else None
        self.state.update(image=self.entry.uid if self.entry is not None else None)
        self.refresh()

    @property
    def result(self):
        """(Segmented, crop labels) of the current model, image and paint, or None (also once the paint no longer
        segments: another folder, a class left unpainted)."""
        return None if self.page.ready() else self.jobs.current("overlay")

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(self.page.paint.state.classes)

    def line(self) -> str:
        """Why there is no overlay, or the classes' shares of the image."""
        if not self.state.shown:
            return ""
        if self.result is not None:
            shares = self.result[0].shares
            return "Paint segmentation: " + ", ".join(f"{c} {s:.0%}" for c, s in shares.items())
        missing = self.page.ready() if self.entry is not None else "Select an image in the strip."
        return f"Paint segmentation: {missing or self.failed or 'segmenting…'}"

    def refresh(self) -> None:
        self.failed = ""
        loaded, s = self.app.model, self.state
        if (not s.shown or loaded is None or self.entry is None or self.page.ready()
                or self.result is not None or self.jobs.running("overlay")):
            self.changed.emit()
            return
        self.jobs.start("overlay", "Paint segmentation", overlay_job, loaded, self.entry.path,
                        self.page.painted(), self.classes, on_result=self._on_result, on_error=self._on_error)
        self.changed.emit()

    def _on_result(self, _result) -> None:
        self.changed.emit()

    def _on_error(self, exc: BaseException) -> None:
        self.failed = str(exc)
        self.changed.emit()
