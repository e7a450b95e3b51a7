"""App, the composition root (napari's `ViewerModel`): builds and owns every model of the app — the app state (model,
images, predictions), the model loader, the Folder model with its labels, tags, export and registered
pages, Compare → Match, Teach, the training run — and the routes between them. Qt-free: the window draws an App
(`MainWindow(app)`), and a script or a notebook drives the same App with no QApplication:

    app = App(ScriptRunner())
    app.load_model("models/digits-vit")
    app.folder.open_paths(["photos/"])
"""

from __future__ import annotations

from collections.abc import Callable

from .app_state import AppState, ModelRequest
from .explore_states import LayerCKAState, PlayState
from .explorers import EXPLORERS
from .folder_export import FolderExport
from .folder_labels import FolderLabels
from .folder_model import FolderModel
from .folder_tags import FolderTags
from .folder_work import FolderWork
from .jobs import Runner
from .match_view import MatchModel
from .model_loader import ModelLoader
from .pages import page_entries
from .paint_overlay import PaintOverlay
from .selection import Selection
from .teach_state import TeachModel
from .training_run import TrainingRun
from .training_states import TrainingState
from .undo import UndoStack


class App:
    def __init__(self, runner: Runner, state: AppState | None = None, follow_loads: bool = True,
                 download: Callable[[int, int], None] | None = None) -> None:
        """`runner`: where jobs run (the window's pools, or `ScriptRunner` in the caller's thread).
        `follow_loads=False`: the face starts each requested load itself (the window waits for its panels)."""
        self.runner = runner
        self.state = state or AppState()
        self.loader = ModelLoader(self.state, runner, download, follow=follow_loads)
        self.undo = UndoStack()  # one for the app: file moves, sorts, labels, paint strokes, in the order made
        self.undo.refused.connect(self._say_refused)
        self.folder = FolderModel(self.state, runner, self.undo)
        self.tags = FolderTags(self.folder)  # tags and saved views of the folder (the app's records)
        self.labels = FolderLabels(self.folder, runner)  # the labels, their file, the quick head
        self.folder.tags, self.folder.labels = self.tags, self.labels  # the App's records, read by the pages
        self.selection = Selection(self.state, self.folder, runner)  # the one current image, wherever picked
        self.folder.selection = self.selection  # the pages read the rows selected from it
        self.folder_work = self.folder.work = FolderWork(runner)  # this machine, or a Ray cluster
        self.pages = {entry.id: entry.model(self.folder) for entry in page_entries()}  # each follows the folder
        self.export = FolderExport(self.folder, self._tags_per_row, self._labels_by_path)
        self.paint_overlay = PaintOverlay(self.pages["paint"])  # the Paint page's classes over the Attention tab
        # one model per explorer (its state and keyed jobs), following the model and image before any view does
        self.explorers = {name: explorer(self.state, runner) for name, explorer in EXPLORERS.items()}
        self.match = MatchModel(runner)
        if self.state.model is not None:
            self.match.set_model(self.state.model)
        self.match.set_a(self.state.selected)
        self.state.model_loaded.connect(self.match.set_model)
        self.state.image_selected.connect(self.match.set_a)
        self.teach = TeachModel()
        self.training = TrainingRun(runner)  # the run in progress (one at a time)
        self.training_state = TrainingState()  # the run shown, the dataset (the Training tab's requests)
        # what the other views ask for (their jobs are keyed by these)
        self.play_state = PlayState()  # the Play tab: the source, the map, recording
        self.layer_cka_state = LayerCKAState()  # Compare → Layers (CKA)

    # -- what a script asks for ---------------------------------------------------------------------------------
    def load_model(self, spec: str, device: str | None = None, precision: str | None = None,
                   weights: str | None = None) -> ModelRequest:
        """Ask for `spec` (the latest request wins); with a `ScriptRunner` it has loaded when this returns."""
        return self.state.request_model(spec, device, precision, weights)

    @property
    def model(self):
        return self.state.model

    def _say_refused(self, line: str) -> None:
        self.state.message.emit("warning", line)

    def _tags_per_row(self) -> list:
        return self.tags.tags

    def _labels_by_path(self) -> dict:
        return self.labels.labels
