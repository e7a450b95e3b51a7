"""The Folder tab's Concepts page, Qt-free: the settings (one schema with `vitstudio concepts`), learning a sparse
autoencoder on the opened folder's patch tokens in the background (R² as it learns; pause, stop, resume), opening a
concepts file, the concept chosen, and the current image read through them (On the image's state). What is shown is
keyed by the model (and folder, file): another model drops it, and concepts learned before on this folder with this
model open again by themselves."""

from __future__ import annotations

from vitstudio.core.concepts.settings import ConceptSettings
from vitstudio.core.train.schema import settings_of

from ..evented import Event, EventedModel, ViewState
from ..folder_states import ConceptsState, ImageConceptsState
from ..jobs import KeyedJobs
from . import PageEntry

SETTINGS = settings_of(ConceptSettings)


def learn_job(cancel, model, folder: str, settings: ConceptSettings):
    from vitstudio.core.concepts.learn import default_output, learn_concepts

    return (yield from learn_concepts(model, [folder], settings, default_output(model, folder, settings), cancel))


def earlier_job(cancel, model, folder: str):
    from vitstudio.core.concepts.maps import learned_before

    found = learned_before(model, folder)
    return None if found is None else str(found)


def open_job(cancel, model, path: str):
    from vitstudio.core.concepts.maps import concepts_for

    return concepts_for(model, path)


class ConceptsModel(EventedModel):
    changed = Event("what is shown changed: other concepts, or none (another model or folder)")
    progress = Event("a learning Progress record")
    stopped = Event("the line to show when learning stopped or failed")
    opened = Event("Concepts, opened from a file or learned")
    attention_requested = Event("concepts file, concept: the Attention tab shows that concept's map of its image")

    title = "Concepts"
    tooltip = "Concepts learned from the folder's patch tokens"

    def __init__(self, folder_model) -> None:
        self.folder, self.app = folder_model, folder_model.app
        self.state = ConceptsState()
        self.settings_state = ViewState(**{s.name: s.spec for s in SETTINGS})
        self.image_state = ImageConceptsState()  # On the image: the current image read through the concepts
        self.jobs = KeyedJobs(self.state, {"learn": ("folder",), "open": ("file",), "earlier": ("folder",)},
                              folder_model.runner, long=("learn",))
        self.learning = None  # the learn job's handle (pause and stop reach its token)
        self.curve: list[float] = []  # R² as it learns
        self.sized = (self.settings_state.size, self.settings_state.k)  # the size and k last chosen for the user
        self.app.model_loaded.connect(self._on_model)
        folder_model.state.events.paths.connect(self._on_paths)
        folder_model.results_changed.connect(self.show)

    @property
    def concepts(self):
        """The Concepts of the current model and file, or None."""
        return self.jobs.current("open")

    def settings(self) -> ConceptSettings:
        return ConceptSettings(**{s.name: getattr(self.settings_state, s.name) for s in SETTINGS})

    def _on_model(self, model) -> None:
        self.state.update(model=model.uid)  # another model's concepts are not this one's: they go
        self.curve = []  # and so does the R² curve of their learning
        self.changed.emit()
        self.look_for_earlier()

    def show(self, results) -> None:
        """The folder's images are counted: the concepts' size and k fit its token count (4,096 on 245 images fitted
        to R² −3.2), unless the user set their own. What was shown goes with the model or the folder (above)."""
        model = self.app.model
        if results is None or not len(results) or model is None:
            return
        from vitstudio.core.concepts.settings import fitting_size

        rows, cols = model.grid_size
        if (self.settings_state.size, self.settings_state.k) == self.sized:
            self.sized = fitting_size(len(results) * rows * cols)
            self.settings_state.update(size=self.sized[0], k=self.sized[1])

    def _on_paths(self, _paths) -> None:
        self.state.update(folder=self.folder.folder)
        self.changed.emit()
        self.look_for_earlier()

    def look_for_earlier(self) -> None:
        """Concepts learned here before on this folder for this model (a restart, a switch back) open again."""
        model, folder = self.app.model, self.folder.folder
        if model is not None and folder is not None and self.concepts is None:
            self.state.update(model=model.uid, folder=folder)
            self.jobs.start("earlier", "Looking for concepts learned before", earlier_job, model, folder,
                            on_result=self._on_earlier)

    def _on_earlier(self, path: str | None) -> None:
        if path is not None and self.concepts is None and not self.jobs.running("learn"):
            self.open_file(path)

    def can_learn(self) -> bool:
        return self.app.model is not None and self.folder.folder is not None

    def start(self) -> str | None:
        """Learn on the folder opened with the settings; a line saying why not when they are invalid."""
        model, folder = self.app.model, self.folder.folder
        try:
            settings = self.settings()
            settings.check()
        except (TypeError, ValueError) as exc:
            return str(exc)
        if model is None or folder is None:
            return "Open a folder first."
        self.state.update(model=model.uid, folder=folder)
        self.curve = []
        self.learning = self.jobs.start("learn", "Learning concepts", learn_job, model, folder, settings,
                                        on_yield=self._on_progress, on_result=self._on_learned,
                                        on_error=self._on_error)
        return None

    def pause(self, paused: bool) -> None:
        if self.learning is not None:
            (self.learning.cancel_token.pause if paused else self.learning.cancel_token.resume)()

    def stop(self) -> None:
        """Stop: the training keeps its checkpoint, and Learn with the same settings resumes it."""
        if self.learning is not None:
            self.learning.cancel()

    def _on_progress(self, p) -> None:
        r2 = getattr(p, "r2", None)
        if r2 is not None and r2 == r2 and abs(r2) != float("inf"):
            self.curve.append(float(r2))
        self.progress.emit(p)

    def _on_learned(self, result) -> None:
        self.learning = None
        if result.path is None:
            self.stopped.emit(f"Stopped at step {result.training.steps}: Learn with the same settings resumes it.")
            return
        self.open_file(str(result.path))

    def _on_error(self, exc: BaseException) -> None:
        self.learning = None
        self.stopped.emit(f"Learning concepts failed: {exc}")
        self.app.report(exc)

    def open_file(self, path: str) -> None:
        model = self.app.model
        if model is None:
            return
        self.state.update(model=model.uid, file=path, concept=0, picked=False)
        self.jobs.start("open", "Opening concepts", open_job, model, path, on_result=self.opened.emit,
                        on_error=self._on_open_error)

    def _on_open_error(self, exc: BaseException) -> None:
        self.state.update(file=None)
        self.stopped.emit(str(exc))
        self.app.report(exc)

    def select(self, index: int, picked: bool = True) -> None:
        self.state.update(concept=int(index), picked=picked or self.state.picked)

    def show_in_attention(self) -> None:
        """The chosen concept's map of the current image, in the Attention tab (the window's route)."""
        if self.state.file is not None and self.concepts is not None:
            self.attention_requested.emit(self.state.file, self.state.concept)


PAGE = PageEntry("concepts", "Learn", ConceptsModel, rank=10)
