"""AppState: the current model, images and predictions, and the model bar's choices. Qt-free: views connect to its
events (each an `Emitter`, called on the thread that changes the state: the GUI's) and write through its methods;
errors reach one notifier (`report`) as exception objects."""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from PIL import Image

from vitstudio.core.fields import DEVICES, PRECISIONS

if TYPE_CHECKING:  # torch-free at import: the window is built from this before torch has loaded
    from vitstudio.core.inference import Prediction
    from vitstudio.core.models.model import LoadedModel

from .evented import Event, EventedModel, Field, Keyed, ViewState
from .notices import Notice

PREVIEW = 640
_uids = itertools.count(1)


@dataclass(eq=False)
class ImageEntry:
    """One image the user added: the decoded picture, or why it could not be read."""

    path: str
    image: Image.Image | None = None
    error: str | None = None
    preview: Image.Image | None = None  # at most PREVIEW px, made off the GUI thread for fast display
    # the last prediction and the model that made it (request: (LoadedModel.uid,)); shown only for that model
    prediction: Keyed | None = None
    uid: int = field(default_factory=lambda: next(_uids))  # what view requests are keyed by


@dataclass(frozen=True)
class ModelRequest:
    """One Load: what to load, where, in which precision; `number` tells two Loads of the same model apart (the
    second one loads again: the files may have changed)."""

    spec: str
    device: str
    precision: str
    weights: str | None = None
    number: int = 0


_requests = itertools.count(1)


def devices_here() -> tuple[str, ...]:
    """'auto', the CPU and the GPUs torch finds; before torch is imported, 'auto' and the CPU only (asking would
    import it: AppState.offer_devices adds the rest later)."""
    if "torch" not in sys.modules:
        return DEVICES[:2]
    from vitstudio.core.models.devices import available_devices

    return ("auto", *available_devices())


def make_entry(path: str, image: Image.Image | None = None, error: str | None = None) -> ImageEntry:
    """An entry with its display preview; call it in a worker (resizing a large photo takes a while)."""
    preview = None
    if image is not None:
        preview = image.copy()
        preview.thumbnail((PREVIEW, PREVIEW))
    return ImageEntry(path, image, error, preview)


class AppState(EventedModel):
    model_loading = Event("spec")
    model_loaded = Event("LoadedModel")
    model_failed = Event("Notice")
    images_added = Event("list[ImageEntry]")
    images_removed = Event("list[ImageEntry], taken out of the strip by the user")
    image_selected = Event("ImageEntry | None")
    prediction_ready = Event("list[ImageEntry]: a batch's predictions, one event")
    message = Event("level ('info' | 'warning'), text")
    message_updated = Event('earlier text, newer text: said again with newer figures (or "": gone)')
    error = Event("Notice: every error the user should hear about, as an exception object")

    def __init__(self) -> None:
        self.model: LoadedModel | None = None
        self.loading: str | None = None  # the spec of a load under way (a view says "Loading…", not "No model")
        self.loaded_spec: str | None = None  # the spec the model loaded was asked for by (None: set directly)
        self.model_loading.connect(self._load_started)  # methods, not lambdas: a lambda holding self keeps it alive
        self.model_failed.connect(self._load_failed)
        self.images: list[ImageEntry] = []
        self.selected: ImageEntry | None = None
        # The model bar: what to load and where. `requested` is the ModelRequest of the last Load: the window
        # loads it, and a new one discards a load still running (latest wins); the combos prepare the next one.
        self.view = ViewState(model=Field(None, int), spec=Field("", str),
                              device=Field("auto", str, choices=devices_here(), help="a device this machine has"),
                              precision=Field("auto", str, choices=PRECISIONS),
                              requested=Field(None, ModelRequest))

    def offer_devices(self) -> None:
        """The GPUs torch finds, once it has loaded (the window may be built before)."""
        self.view.redeclare("device", choices=devices_here())

    def request_model(self, spec: str, device: str | None = None, precision: str | None = None,
                      weights: str | None = None) -> ModelRequest:
        """Ask for `spec` on the model bar's device and precision (or those given, when this machine has the
        device): the window loads it, and the latest request wins."""
        view = self.view
        device = device if device in view.fields()["device"].choices else view.device
        request = ModelRequest(spec, device, precision or view.precision, weights, next(_requests))
        self.loading = spec  # asked for: under way from now on (the window starts it, or a newer request wins)
        view.update(spec=spec, device=request.device, precision=request.precision, requested=request)
        return request

    def report(self, exc: BaseException | Notice, context: str = "") -> Notice:
        """The one way an error reaches the user (log, status bar, a non-modal box with details on demand)."""
        notice = exc if isinstance(exc, Notice) else Notice(exc, context)
        self.error.emit(notice)
        return notice

    def _load_started(self, spec: str) -> None:
        self.loading = spec

    def _load_failed(self, _notice) -> None:
        self.loading = None

    def set_model(self, loaded: LoadedModel) -> None:
        self.model, self.loaded_spec, self.loading = loaded, self.loading, None
        self.view.update(model=loaded.uid)
        # Predictions are shown only for the model loaded (loading again makes a new uid), so the previous model's
        # go: kept, every image would hold a prediction and crop (150 KB at 224 px) of a model no longer shown.
        for entry in self.images:
            if entry.prediction is not None and entry.prediction.request != (loaded.uid,):
                entry.prediction = None
        self.model_loaded.emit(loaded)

    def add_images(self, entries: list[ImageEntry]) -> None:
        self.images.extend(entries)
        self.images_added.emit(entries)
        bad = [e for e in entries if e.error]
        for entry in bad:
            self.message.emit("warning", f"{entry.path}: {entry.error}")
        if self.selected is None:
            first_good = next((e for e in entries if e.error is None), None)
            if first_good is not None:
                self.select(first_good)

    def remove_images(self, entries: list[ImageEntry]) -> None:
        """Take images out (the files stay); the selection moves to the next image left, or to none."""
        gone = [e for e in entries if e in self.images]
        if not gone:
            return
        after = self.images[self.images.index(gone[0]):]
        self.images = [e for e in self.images if e not in gone]
        self.images_removed.emit(gone)
        if self.selected in gone:
            self.select(next((e for e in after if e in self.images), self.images[-1] if self.images else None))

    def select(self, entry: ImageEntry | None) -> None:
        self.selected = entry
        self.image_selected.emit(entry)

    def prediction_for(self, entry: ImageEntry) -> Prediction | None:
        """The loaded model's prediction of `entry`, or None (not made yet, or made by another model)."""
        kept = entry.prediction
        if self.model is None or kept is None or kept.request != (self.model.uid,):
            return None
        return kept.value

    def set_prediction(self, entry: ImageEntry, model: LoadedModel, prediction: Prediction) -> None:
        self.set_predictions(model, [(entry, prediction)])

    def set_predictions(self, model: LoadedModel, pairs: list[tuple[ImageEntry, Prediction]]) -> None:
        """A batch of predictions, announced in one event (a view recounting per image was quadratic)."""
        if model is not self.model or not pairs:
            return  # a late result of a model no longer loaded: never shown, so not kept
        for entry, prediction in pairs:
            entry.prediction = Keyed((model.uid,), prediction)
        self.prediction_ready.emit([entry for entry, _ in pairs])
