"""The Teach tab's model, Qt-free: the project open, its classes as cards, samples added from files, a
folder or frames held to record, and the refit each change asks for. The view draws it; a script or a test drives it
without a QApplication. No torch at import: the project is files (core/teach/project.py imports PIL only).

Every change to the samples bumps `revision`; the refit job is keyed by (model, project, revision, recipe), so a
refit asked for before the latest change is discarded (latest wins) and its result is never shown for a newer
project. Hold to record keeps frames at `record_fps` (Teachable Machine's web app records 24 per second), at most
`record_max` per hold (0: no limit), by the frames' own times: a slow source gives what it has, never duplicates."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from vitstudio.core.analysis import registry
from vitstudio.core.teach.project import (
    RECIPES,
    TeachProject,
    TeachSettings,
    add_files,
    add_images,
    check_new_class,
    create_project,
    delete_class,
    open_project,
    recorded_spec,
    remove_sample,
    rename_class,
    save_settings,
    write_labels,
)
from vitstudio.core.teach.recipes import duration, expected_seconds

from .evented import Field, ViewState

THUMBNAILS = 6  # the newest samples a card shows
RECIPE_LABELS = ("Quick head (L-BFGS)", "Teachable Machine's recipe")
REFIT_KEY = ("project", "revision", "recipe", "augment")  # what a refit depends on, besides the model


class TeachState(ViewState):
    CONTEXT = ("model",)  # a refit is of the model's features, whatever image the other tabs show
    model: int | None = None
    project: str | None = None  # the project folder
    revision: int = 0  # bumped by every change to the samples: the refit's key
    recipe: str = Field("quick", choices=RECIPES, labels=RECIPE_LABELS,
                        help="the head fitted after each change, and about how long a refit of these samples takes "
                             "under it on a 2-core CPU")
    augment: bool = Field(False, help="also fit the head on two augmented views (crop, flip) of each training "
                                      "sample; off, as Teachable Machine")
    source: str | None = None  # the preview's video file or camera:N
    method: str | None = Field(None, valid=registry.is_registered)  # the map over the preview (None: none, the default)
    record_to: str | None = None  # the card held frames go to
    record_fps: float = Field(24.0, help="frames added per second while recording is held")


@dataclass(frozen=True)
class Card:
    name: str
    count: int
    thumbnails: tuple[Path, ...]  # the newest samples, newest first


class HeldFrames:
    """Frames offered while record is held, kept at `fps` by their own times and at most `limit` (0: any)."""

    def __init__(self, fps: float, limit: int = 0) -> None:
        import uuid

        self.gap, self.limit = 1.0 / fps, limit
        self.recording = uuid.uuid4().hex[:12]  # the project keeps which frames came from this hold
        self.frames: list = []
        self._due: float | None = None  # when the next frame is due: one every `gap` on average, never two at once

    def offer(self, time_s: float, frame) -> bool:
        """True when the frame is kept."""
        if self.limit and len(self.frames) >= self.limit:
            return False
        if self._due is not None and time_s < self._due - 1e-9:
            return False
        self._due = max((self._due or time_s) + self.gap, time_s)  # a source slower than the rate: each frame
        self.frames.append(frame)
        return True


class TeachModel:
    """The project behind the Teach tab, and what each user action does to it."""

    def __init__(self, state: TeachState | None = None) -> None:
        self.state = state or TeachState()
        self.project: TeachProject | None = None
        self.held: HeldFrames | None = None
        # (classes, head) of the newest refit, read by the preview job at each frame (one attribute swapped whole)
        self.live_head = None
        # a refit under Teachable Machine's recipe grows with the samples (~13 s for 2,000 augmented): the list
        # says how long before it is chosen
        self.state.events.revision.connect(self._time_recipes)
        self.state.events.augment.connect(self._time_recipes)

    def open(self, folder: str | Path) -> TeachProject:
        """Open (or create, when the folder is new or empty) a project; the recipe comes from its settings."""
        folder = Path(folder)
        fresh = not folder.exists() or not any(folder.iterdir())
        self.project = create_project(folder, []) if fresh else open_project(folder)
        self.live_head = None  # the previous project's head: not one for these samples, even under the same names
        with self.state.batch():
            self.state.project = str(folder)
            self.state.recipe = self.project.settings.recipe
            self.state.augment = self.project.settings.augment
            self.state.record_fps = self.project.settings.record_fps
            self.state.revision += 1
        return self.project

    def recipe_labels(self) -> tuple[str, ...]:
        """The recipes as the list shows them: each with about how long a refit of this project takes under it."""
        samples = sum(map(len, self.project.samples.values())) if self.project is not None else 0
        return tuple(f"{label} · {duration(expected_seconds(recipe, samples, self.state.augment))} a refit"
                     for recipe, label in zip(RECIPES, RECIPE_LABELS, strict=True))

    def _time_recipes(self, _changed=None) -> None:
        self.state.redeclare("recipe", labels=self.recipe_labels())

    def cards(self) -> list[Card]:
        if self.project is None:
            return []
        return [Card(name, len(files), tuple(sorted(files, key=_mtime, reverse=True)[:THUMBNAILS]))
                for name, files in self.project.samples.items()]

    def add_class(self, name: str) -> None:
        """A new, empty class; a name a class has already is refused (ProjectError), not ignored."""
        check_new_class(self._project(), name)
        self._changed(create_project(self._root(), [*self.project.classes, name], self.project.settings))

    def rename_class(self, name: str, new: str) -> None:
        """Class `name` is called `new` from now on, its samples with it; a name taken is refused."""
        self._not_recording(name)
        self._changed(rename_class(self._project(), name, new))

    def delete_class(self, name: str) -> None:
        """Class `name` and its samples deleted from the project."""
        self._not_recording(name)
        self._changed(delete_class(self._project(), name))

    def remove_sample(self, path: str | Path) -> None:
        """One sample's file deleted from its class."""
        self._changed(remove_sample(self._project(), path))

    def _not_recording(self, name: str) -> None:
        if self.state.record_to == name:
            raise ValueError(f"Frames are being recorded into {name}: release Hold to record first.")

    def add_files(self, name: str, paths: list[str | Path]) -> None:
        """Files, or every image under the folders given, copied into class `name`."""
        from vitstudio.core.data.images import expand_paths

        self._changed(add_files(self.project, name, [str(p) for p in expand_paths(paths)]))

    def add_frames(self, name: str, frames: list, recording: str | None = None) -> None:
        """RGB frames (numpy arrays or PIL images) added to class `name`; `recording`: the hold they come from."""
        from PIL import Image

        self._changed(add_images(self.project, name, [f if isinstance(f, Image.Image) else Image.fromarray(f)
                                                      for f in frames], recording))

    def set_recipe(self, recipe: str) -> None:
        self._set(recipe=recipe)

    def set_augment(self, augment: bool) -> None:
        """Augmentation on or off: saved with the project, a new refit (its key has changed)."""
        self._set(augment=augment)

    def _set(self, **setting) -> None:
        settings = replace(self.project.settings, **setting)
        save_settings(self._root(), settings)
        self.project = replace(self.project, settings=settings)
        self.state.update(**setting)

    def taught_with(self, spec: str, weights: str | None = None) -> None:
        """A head was just taught with this model: the project records it (spec and weights file), so
        `vitstudio teach PROJECT` uses the same model. Written only when it changed."""
        if self.project is None or not self.project.is_teach_project:  # a plain class-folder tree is only read
            return
        spec, weights = recorded_spec(spec, weights)
        settings = self.project.settings
        if (settings.model, settings.weights) != (spec, weights):
            settings = replace(settings, model=spec, weights=weights)
            save_settings(self._root(), settings)
            self.project = replace(self.project, settings=settings)

    def hold(self, name: str) -> None:
        """Record is pressed on card `name`: frames offered from now on are kept for it."""
        self.state.record_to = name
        self.held = HeldFrames(self.state.record_fps, self.project.settings.record_max if self.project else 0)

    def offer(self, time_s: float, frame) -> bool:
        return self.held is not None and self.held.offer(time_s, frame)

    def release(self) -> int:
        """Record is released: the kept frames join the card (one change, one refit). Returns how many."""
        held, self.held = self.held, None
        name, self.state.record_to = self.state.record_to, None
        if held is None or not held.frames or name is None:
            return 0
        self.add_frames(name, held.frames, held.recording)
        return len(held.frames)

    def finish_hold(self, why: str | None = None) -> str | None:
        """Record released, or its source gone (`why`: a camera unplugged, a video that ended): the frames kept so far
        join the card. Returns the one line to show (None: nothing was held); a write that fails half way (a full
        disk) keeps the frames written before it, each file whole, and says how many."""
        name, before = self.state.record_to, self._count(self.state.record_to)
        if name is None or self.held is None:
            self.held, self.state.record_to = None, None
            return None
        held = len(self.held.frames)
        failed = self.attempt(self.release)
        added = self._count(name) - before
        said = f"{why}; " if why else ""
        if failed:
            return f"{said}{added} of {held} frames held were added to {name} before a write failed: {failed}"
        return f"{said}{held} frame{'s' if held != 1 else ''} added to {name}; teaching…"

    def attempt(self, action, *args) -> str | None:
        """A change to the project; None when done, else the one line to show: a refusal (a bad name, an unreadable
        file: ValueError) or a write that failed (OSError: a full disk), after which the project is as on disk."""
        try:
            action(*args)
        except ValueError as exc:
            return " ".join(str(exc).split())
        except OSError as exc:
            self.reload()
            return (f"could not write {Path(exc.filename).name if exc.filename else 'a sample'} "
                    f"({exc.strerror or exc}); the samples written before it are in the project.")
        return None

    def reload(self) -> None:
        """The project as it is on disk after a change that stopped half way (a full disk): what was written stays;
        labels.csv is rewritten when the disk allows (the folders are the truth, the next change rewrites it too)."""
        if self.project is not None:
            self._changed(replace(open_project(self.project.root), settings=self.project.settings))
            try:
                write_labels(self.project)
            except OSError:
                pass

    def _count(self, name: str | None) -> int:
        return len(self.project.samples.get(name, ())) if self.project is not None and name else 0

    def refit_request(self) -> tuple:
        return self.state.request(*REFIT_KEY)

    def _root(self) -> Path:
        return self._project().root

    def _project(self) -> TeachProject:
        if self.project is None:
            raise ValueError("Open or create a Teach project first.")
        return self.project

    def _changed(self, project: TeachProject) -> None:
        self.project = project
        self.state.revision += 1


def app_model_spec(app) -> tuple[str, str | None]:
    """(spec, weights) of the model `app` (an AppState) has loaded, as its model bar asked for it; a model set
    directly (a script) by its name."""
    model, request = app.model, app.view.requested
    spec = app.loaded_spec or model.name
    weights = request.weights if request is not None and request.spec == spec else None
    return spec, weights


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


__all__ = ["Card", "HeldFrames", "TeachModel", "TeachSettings", "TeachState"]
