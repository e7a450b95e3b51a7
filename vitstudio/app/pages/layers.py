"""The Folder tab's Layers page: a k-fold linear probe on each block's feature of the folder's images (which layer
separates its classes best). Its job is module-level, every input passed explicitly; the core is imported when it
runs, and FEATURE_NOTE (what a block's feature is, in words) when first asked (PEP 562's module `__getattr__`)."""

from __future__ import annotations

from ..evented import Event, EventedModel
from . import PageEntry


def __getattr__(name: str):
    if name == "FEATURE_NOTE":
        from vitstudio.core.folder.layer_cache import FEATURE_NOTE

        return FEATURE_NOTE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def probes_job(cancel, model, folder: str):
    """Yields progress; returns the LayerProbes of every block of `model` on the class folders of `folder`."""
    from vitstudio.core.train.layer_probes import probe_layers

    return (yield from probe_layers(model, folder, cancel=cancel))


class LayersModel(EventedModel):
    """The page's model: the probes of the current model on the open folder of class folders, asked for by `start`
    (a long job, cancelled by `cancel`, the features read so far cached), dropped when the model or folder changes."""

    progress = Event("the job's Progress records")
    changed = Event("the result, a run started or stopped, or a failure: draw again")

    title = "Layers"
    tooltip = "At which depth the folder's classes become readable: a linear probe per block beside the logit lens"

    def __init__(self, folder) -> None:
        from ..folder_states import LayersState
        from ..jobs import KeyedJobs

        self.folder = folder
        self.state = LayersState(model=self._model_uid(), folder=folder.folder)
        self.jobs = KeyedJobs(self.state, {"probes": ("folder",)}, folder.runner, long=("probes",))
        self.failure: str | None = None  # why the last run failed, in one line
        folder.app.model_loaded.connect(self._follow)
        folder.state.events.paths.connect(self._follow)

    def show(self, _results) -> None:
        """The folder's results come and go with the model and folder followed above: nothing more to drop."""

    @property
    def result(self):
        """The LayerProbes of the current model and folder, or None."""
        return self.jobs.current("probes")

    def running(self) -> bool:
        return self.jobs.running("probes")

    def ready(self) -> bool:
        return self.folder.app.model is not None and self.folder.folder is not None

    def _follow(self, _value) -> None:
        self.failure = None
        self.state.update(model=self._model_uid(), folder=self.folder.folder)  # what the old pair had goes
        self.changed.emit()

    def _model_uid(self) -> int | None:
        model = self.folder.app.model
        return model.uid if model is not None else None

    def start(self) -> None:
        model, folder = self.folder.app.model, self.folder.folder
        if model is None or folder is None:
            return
        self.failure = None
        self.state.update(model=model.uid, folder=folder)
        self.jobs.start("probes", "Probing the layers", probes_job, model, folder, on_yield=self.progress.emit,
                        on_result=self._done, on_error=self._failed)
        self.changed.emit()

    def cancel(self) -> None:
        self.jobs.discard("probes")
        self.changed.emit()

    def _done(self, _result) -> None:
        self.changed.emit()

    def _failed(self, exc: BaseException) -> None:
        self.failure = f"The probes failed: {exc}"
        self.folder.app.report(exc)
        self.changed.emit()


PAGE = PageEntry("layers", "Learn", LayersModel, rank=20)
