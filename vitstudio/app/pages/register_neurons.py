"""The Folder tab's Register neurons page, Qt-free: Jiang et al.'s search for the MLP neurons that make the current
model's high-norm artifact tokens, over the folder's images (`vitstudio registers FOLDER`), each neuron's activation
on the folder's selected image, and the register file written for `--registers`. What was found goes with another
model or folder."""

from __future__ import annotations

from vitstudio.core.fields import Range

from ..evented import Event, EventedModel, Field, ViewState
from . import PageEntry


def search_job(cancel, model, paths: list[str], detect_layer: int, top: int):
    """Yields progress; returns the RegisterNeurons of `model` over `paths` (threshold: auto)."""
    from vitstudio.core.analysis.registers import find_register_neurons

    result, _errors = yield from find_register_neurons(model, paths, detect_layer, "auto", None, top, cancel=cancel)
    return result


def artifacts_job(cancel, model, paths: list[str], registers):
    """(Artifacts of the plain model, Artifacts with a test-time register on `registers`' neurons, or None without
    any): every block's patch norms over `paths` both ways (`vitstudio artifacts` without and with --registers)."""
    from vitstudio.core.analysis.registers import test_time_register
    from vitstudio.core.analysis.token_norms import artifacts

    plain, _ = yield from artifacts(model, paths, cancel=cancel)
    if registers is None or not registers.neurons:
        return plain, None
    with test_time_register(model, registers):
        moved, _ = yield from artifacts(model, paths, cancel=cancel)
    return plain, moved


def maps_job(cancel, model, path: str, neurons: tuple):
    """(the crop the model sees (H, W, 3) uint8, (k, gh, gw) each (layer, neuron)'s activation on its patches)."""
    import numpy as np

    from vitstudio.core.analysis.registers import neuron_maps
    from vitstudio.core.data.images import read_image

    crop = model.crop(read_image(path))
    return np.asarray(crop, dtype=np.uint8), neuron_maps(model, model.to_tensor(crop)[None], list(neurons))


class RegisterNeuronsState(ViewState):
    """The model and folder searched, how, and the image whose activation maps are shown."""

    CONTEXT = ("model",)
    model: int | None = None
    paths: tuple = ()
    detect_layer: int = Field(-1, range=Range(-64, 63), help="the block whose output norms pick the outlier tokens "
                              "(negative counts from the end; the paper takes -2 for DINOv2-L, -1 for OpenCLIP-B)")
    top: int = Field(10, range=Range(1, 200), help="neurons kept, best first")
    image: str | None = None


class RegisterNeuronsModel(EventedModel):
    progress = Event("the search's Progress records")
    changed = Event("the result, the maps, a run started or stopped, or a failure: draw again")

    title = "Registers"  # the side lists titles in a column as wide as the longest; the tooltip says the rest
    tooltip = ("The MLP neurons that write the model's high-norm artifact tokens (Jiang et al. 2025's register "
               "neurons), each one's activation on the selected image, and a register file for --registers")

    def __init__(self, folder) -> None:
        from ..jobs import KeyedJobs

        self.folder = folder
        self.state = RegisterNeuronsState(model=self._model_uid(), paths=tuple(folder.state.paths))
        self.jobs = KeyedJobs(self.state, {"search": ("paths", "detect_layer", "top"),
                                           "artifacts": ("paths", "detect_layer", "top"),
                                           "maps": ("paths", "detect_layer", "top", "image")},
                              folder.runner, long=("search", "artifacts"))
        self.failure: str | None = None  # why the last search failed, in one line
        self.picked = 0  # the neuron whose activation map is shown
        folder.app.model_loaded.connect(self._follow)
        folder.state.events.paths.connect(self._follow)
        folder.row_selected.connect(self._on_row)

    def show(self, _results) -> None:
        """The results come and go with the model and paths followed above: nothing more to drop."""

    @property
    def result(self):
        """The RegisterNeurons of the current model and folder, or None."""
        return self.jobs.current("search")

    @property
    def maps(self):
        """(the selected image's crop (H, W, 3), (neurons, gh, gw) activation maps on it), or None."""
        return self.jobs.current("maps")

    @property
    def artifacts(self):
        """(the folder's Artifacts on the plain model, the same with the test-time register or None), or None."""
        return self.jobs.current("artifacts")

    def pick(self, index: int) -> None:
        """The neuron (its rank in the result) whose map is shown."""
        if index != self.picked:
            self.picked = index
            self.changed.emit()

    def running(self) -> bool:
        return self.jobs.running("search") or self.jobs.running("artifacts")

    def ready(self) -> bool:
        return self.folder.app.model is not None and bool(self.folder.state.paths)

    def _model_uid(self) -> int | None:
        model = self.folder.app.model
        return model.uid if model is not None else None

    def _follow(self, _value) -> None:
        self.failure = None
        self.state.update(model=self._model_uid(), paths=tuple(self.folder.state.paths), image=None)
        self.changed.emit()

    def _on_row(self, row: int | None) -> None:
        results = self.folder.results
        image = results.paths[row] if row is not None and results is not None else None
        if image != self.state.image:
            self.state.update(image=image)
            self._start_maps()
            self.changed.emit()

    def start(self) -> None:
        model = self.folder.app.model
        if not self.ready():
            return
        self.failure = None
        self.state.update(model=model.uid, paths=tuple(self.folder.state.paths))
        self.jobs.start("search", "Register neurons", search_job, model, list(self.state.paths),
                        self.state.detect_layer, self.state.top, on_yield=self.progress.emit, on_result=self._found,
                        on_error=self._failed)
        self.changed.emit()

    def cancel(self) -> None:
        self.jobs.discard("search")
        self.jobs.discard("artifacts")
        self.changed.emit()

    def _found(self, result) -> None:
        self.picked = 0
        self._start_maps()
        self.jobs.start("artifacts", "Patch norms per block", artifacts_job, self.folder.app.model,
                        list(self.state.paths), result, on_yield=self.progress.emit, on_result=self._drawn,
                        on_error=self._failed)
        self.changed.emit()

    def _start_maps(self) -> None:
        result, image = self.result, self.state.image
        if result is None or not result.neurons or image is None:
            return
        self.jobs.start("maps", "Register neuron maps", maps_job, self.folder.app.model, image,
                        tuple((n.layer, n.neuron) for n in result.neurons), on_result=self._drawn,
                        on_error=self._failed)

    def _drawn(self, _maps) -> None:
        self.changed.emit()

    def _failed(self, exc: BaseException) -> None:
        self.failure = f"The search failed: {exc}"
        self.folder.app.report(exc)
        self.changed.emit()

    def save(self, path: str) -> str:
        """Write the register file (`--registers FILE` of predict and explain); returns where."""
        from vitstudio.core.analysis.registers import write_registers

        return str(write_registers(self.result, path))


PAGE = PageEntry("register-neurons", "Learn", RegisterNeuronsModel, rank=40)
