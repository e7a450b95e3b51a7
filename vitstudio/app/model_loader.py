"""Loading the model the app asks for (`AppState.request_model`), Qt-free: one keyed slot, so a newer request
discards a load still running, and the loaded model goes to `AppState.set_model` (every view follows from there).
The window starts a load once its panels exist; a script starts it at once."""

from __future__ import annotations

from collections.abc import Callable

from .app_state import AppState, ModelRequest
from .jobs import KeyedJobs, Runner


def load_model_job(cancel, spec: str, weights: str | None, device: str, precision: str,
                   download: Callable[[int, int], None] | None):
    from vitstudio.core.models.loading import load_model
    from vitstudio.core.models.modelcard import model_card

    progress = None if download is None else (lambda done, total, _message: download(done, total))
    loaded = load_model(spec, weights, device, precision, progress=progress)
    model_card(loaded)  # FLOPs need a forward: done here, off the GUI thread
    return loaded


class ModelLoader:
    def __init__(self, app: AppState, runner: Runner, download: Callable[[int, int], None] | None = None,
                 follow: bool = True) -> None:
        """`download(done, total)`: a hub download's progress (called on the job's thread). `follow=False`: the
        face calls `load` itself (the window waits for its panels)."""
        self.app, self.download = app, download
        self.follows = follow  # loads start by themselves on every request (else the face starts each one)
        self.jobs = KeyedJobs(app.view, {"load": ("requested",)}, runner, without_context=("load",))
        if follow:
            app.view.events.requested.connect(self.load)

    def load(self, request: ModelRequest) -> None:
        self.app.model_loading.emit(request.spec)
        self.jobs.start("load", "Loading model", load_model_job, request.spec, request.weights, request.device,
                        request.precision, self.download, on_result=self._on_loaded, on_error=self._on_failed)

    def _on_loaded(self, loaded) -> None:
        self.jobs.clear("load")  # the model lives in AppState; the slot must not keep a second reference
        self.app.set_model(loaded)

    def _on_failed(self, exc: BaseException) -> None:
        notice = self.app.report(exc, "Loading model")
        self.app.model_failed.emit(notice)
