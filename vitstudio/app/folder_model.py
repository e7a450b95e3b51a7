"""The Folder model, Qt-free: a whole folder through the current model — what is opened, its results, the filters
and the rows they leave, the map's points and box, a picked duplicate group, the similar images of a row, the label
review — and the one rule that drops them: everything here is of (model, paths), so another model or folder
forgets it all at once (`forget`). Work runs through `KeyedJobs` over the runner the face gives (the window's pools,
or a script's own thread); views follow the events below and write through the methods."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from vitstudio.core.files import counted

from .evented import Event, EventedModel
from .file_operations import FileOperations
from .folder_jobs import KEYS, fit_job, map_job, review_job, scan_job, scores_job, similar_job
from .folder_states import FILTER_DEFAULTS, FolderState, offered_classes
from .jobs import KeyedJobs, Runner
from .map_selection import rows_in_polygon
from .notices import describe
from .undo import UndoStack

if TYPE_CHECKING:
    from vitstudio.core.folder.results import FolderResults

    from .app_state import AppState

NO_CLASSES = (" This model has no classes (features only): no predictions, confidence or sorting; the map, similar "
              "images, duplicates and label review use its features. Give it classes (the Classes box of a "
              "CLIP-style model) or fine-tune a head.")
EMPTY_FOLDER = ("No images in {source}: open a folder holding .jpg, .png, .bmp, .webp or .tif images (subfolders "
                "are searched too), e.g. one folder per class.")
OPEN_FIRST = "Open a folder to see every image through the current model."


class FolderModel(EventedModel):
    said = Event("the line changed (`line`, `reopen`)")
    busy = Event("True while a scan or review runs (progress shown, Cancel offered)")
    progress = Event("a job's Progress record")
    results_changed = Event("FolderResults | None (None: everything shown goes)")
    rows_changed = Event("the rows the filters leave")
    map_ready = Event("coords, method")
    fit_ready = Event("FolderFit")
    scores_ready = Event("FolderScores, row for row with the results")
    similar_ready = Event("row, [(path, similarity)]")
    review_ready = Event("AuditReport")
    relocated = Event("FolderResults: the same rows, files moved (a sort, a move, their undo)")
    row_selected = Event("the row selected, or None")

    def __init__(self, app: AppState, runner: Runner, undo: UndoStack | None = None) -> None:
        self.app, self.runner = app, runner  # the runner: the registered pages ask for their work through it too
        self.undo = undo or UndoStack()  # the app's one undo stack: the pages push their changes onto it too
        self.state = FolderState()
        self.jobs = KeyedJobs(self.state, KEYS, runner, long=("scan", "map", "review", "fit", "scores"))
        self.folder: str | None = None  # the folder opened (label review and retraining need one)
        self.source = ""  # what is shown, in words
        self.embedded = None
        self.results: FolderResults | None = None
        self.coords: np.ndarray | None = None
        self.map_method = ""
        self.box: tuple | None = None  # the map's box, (x, y, width, height) in the map's coordinates
        self.map_rows: np.ndarray | None = None  # what the user selected on the map (a drag of the box, a lasso)
        self.group_rows: np.ndarray | None = None  # a duplicate group (or suggestions) picked: just these rows
        self.rows: np.ndarray = np.zeros(0, np.int64)  # what the filters leave, in results order
        self.narrowers: list = []  # () -> rows or None: filters over columns kept elsewhere (tags, a view's rules)
        self.selected: int | None = None  # the row the user selected (the table, the gallery): the current image
        self.report = None  # the label review's AuditReport
        self.fit = None  # the folder's fit to the model (out-of-distribution flags, folders vs classes)
        self.scores = None  # the brain's scores of the results' rows (core/folder/scores.py), once computed
        self.waiting_paths: list[str] | None = None  # opened before any model was loaded
        self.line = OPEN_FIRST  # what the tab says about the folder now
        self.reopen = False  # the line offers to open the folder again through a new model
        self.labels = None  # the labels made in the app (FolderLabels): the App sets it, the pages read it
        self.selection = None  # the App's one selection (the current image, the rows selected): set by the App
        self.work = None  # where its embedding pass runs (FolderWork: this machine or a Ray cluster), the App's
        self.files = FileOperations(runner, self.undo)  # sorts and review moves of the files shown, undoable
        self.files.said.connect(app.message.emit)
        self.files.relocated.connect(self.follow_moves)
        self.files.failed.connect(self._on_failed)
        self.state.connect(self._on_state)
        app.model_loaded.connect(self._on_model)

    # -- opening -----------------------------------------------------------------------------------------
    def open_paths(self, paths: list[str]) -> None:
        """A folder, or any drop of files and folders: every image through the model."""
        model = self.app.model
        if model is None:  # kept: the first model loaded opens it (File → Open folder before any model)
            self.waiting_paths = list(paths)
            self._say(f"Load a model (the bar above) and {', '.join(paths)} opens here.")
            return
        self.waiting_paths = None
        self.folder = paths[0] if len(paths) == 1 and os.path.isdir(paths[0]) else None
        roots = [p if os.path.isdir(p) else os.path.dirname(p) for p in paths]
        self.source = self.folder or f"{len(paths)} dropped items"
        with self.state.batch():  # filters belong to a folder: another one starts unfiltered
            if tuple(paths) != self.state.paths:
                self.state.update(**FILTER_DEFAULTS)
            self.state.update(model=model.uid, paths=tuple(paths))
        self._say(f"Embedding {self.source} with {model.display_name}…")
        self.busy.emit(True)
        cluster = self.work.cluster() if self.work is not None else None  # this machine, or a Ray cluster
        self.jobs.start("scan", "Folder embeddings", scan_job, model, list(paths), roots, cluster,
                        on_yield=self.progress.emit, on_result=self._on_embedded, on_error=self._on_failed)

    def cancel(self) -> None:
        self.jobs.discard("scan")
        self.busy.emit(False)
        self._say("Cancelled; what was computed is cached and will not be computed again.")

    def _on_failed(self, exc: BaseException) -> None:
        self.busy.emit(False)
        self._say(f"Failed: {describe(exc)}")  # replaces "Embedding…" / "Reviewing labels…"
        self.app.report(exc)

    def _on_embedded(self, done: tuple) -> None:
        embedded, results = done
        self.busy.emit(False)
        self.embedded, self.results = embedded, results
        self.scores = None  # of the previous scan: recomputed after the map
        self.jobs.discard("scores")
        classes = sorted(set(results.predicted_labels().tolist()) - {""})
        with self.state.batch():  # a class these results don't have goes back to all classes
            self.state.redeclare("predicted", **offered_classes(classes))
            if not results.has_predictions:  # the map colours by given label: the combo says so
                self.state.colour_by = "given label"
        self.map_rows = self.group_rows = None
        self.results_changed.emit(results)
        self.apply_filters()
        for path, reason in embedded.errors:
            self.app.message.emit("warning", f"{path}: {reason}")
        if not len(results):
            self._say(EMPTY_FOLDER.format(source=self.source))
            return
        self._say(f"{counted(len(results), 'image')} of {self.source} ({embedded.computed} computed now, "
                  f"{len(results) - embedded.computed} from the cache, {len(embedded.errors)} unreadable). Select a "
                  f"row for similar images." + ("" if results.has_predictions else NO_CLASSES))
        self.jobs.start("map", "Folder map", map_job, embedded, on_result=self._on_map, on_error=self._on_failed)

    def _on_fit(self, fit) -> None:
        self.fit = fit
        self.fit_ready.emit(fit)

    def _on_model(self, model) -> None:
        from vitstudio.core.folder.embedcache import model_fingerprint

        shown = self.embedded.tower if self.embedded is not None else ""
        embedding = self.embedded is None and self.jobs.pending["scan"] is not None  # half through the old model
        with self.state.batch():  # the box was drawn on the old model's map: it selects nothing on the new one
            self.state.update(model=model.uid, follow_map=False)
        if self.waiting_paths:
            self.open_paths(self.waiting_paths)
        elif self.state.paths and (embedding or shown and shown == model_fingerprint(model)):
            # a folder being embedded goes on through the new model (the switch dropped it); the same image tower (a
            # quick run of the model shown, a CLIP model given other classes): cached features, open again at once
            self.open_paths(list(self.state.paths))
        elif self.source:
            self._say(f"A new model: open {self.source} again to see it through this one.", reopen=True)

    def _on_state(self, name: str, value) -> None:
        if name in ("model", "paths"):
            self.forget()
        elif name in FILTER_DEFAULTS:
            self.apply_filters()
        elif name == "lasso" and not value and self.map_rows is not None:
            self.map_rows = None  # back to the box: what it holds is the selection again
            self.apply_filters()

    def forget(self) -> None:
        """Nothing computed for the previous model or paths stays (on screen, or in an export)."""
        self.results = self.embedded = self.coords = self.report = self.fit = self.box = self.selected = None
        self.scores = None
        self.map_rows = self.group_rows = None
        self.rows = np.zeros(0, np.int64)
        self.busy.emit(False)
        self.results_changed.emit(None)

    # -- filters, map, similar ---------------------------------------------------------------------------
    def apply_filters(self) -> None:
        """The rows the filters leave. Following the map: what was selected on it, else the box as placed (a
        restart kept "follow" checked before any drag)."""
        if self.results is None:
            return
        s = self.state
        rows = self.results.select(s.predicted, s.min_conf, correct=s.correct)
        inside = self.selected_on_map()
        if inside is not None:
            rows = np.intersect1d(rows, inside)
        if self.group_rows is not None:
            rows = np.intersect1d(rows, self.group_rows)
        for narrow in self.narrowers:
            kept = narrow()
            if kept is not None:
                rows = np.intersect1d(rows, kept)
        self.rows = rows
        self.rows_changed.emit(rows)

    def reset_filters(self) -> None:
        self.map_rows = self.group_rows = None
        if not self.state.update(**FILTER_DEFAULTS):
            self.apply_filters()  # nothing was set, but the map box is gone

    def selected_on_map(self) -> np.ndarray | None:
        """What the table follows on the map: the rows selected there (a box drag, a lasso), else the box as placed;
        None while the table does not follow the map."""
        if not self.state.follow_map:
            return None
        return self.map_rows if self.map_rows is not None else self.rows_in_box()

    def rows_in_box(self) -> np.ndarray | None:
        if self.box is None or self.coords is None:
            return None
        (x, y, w, h), c = self.box, self.coords
        return np.flatnonzero((c[:, 0] >= x) & (c[:, 0] <= x + w) & (c[:, 1] >= y) & (c[:, 1] <= y + h))

    def move_box(self, x: float, y: float, width: float, height: float) -> None:
        """The user moved the map's box: the table follows what it holds."""
        self.box = (x, y, width, height)
        self.select_on_map(self.rows_in_box())

    def select_on_map(self, rows) -> None:
        """`rows` selected on the map (the box, a lasso): the table follows them."""
        self.map_rows = np.asarray(rows, np.int64)
        if not self.state.follow_map:
            self.state.follow_map = True  # the box is a filter: it is what the user is doing
        else:
            self.apply_filters()

    def select_lasso(self, polygon) -> None:
        """A free-form outline drawn on the map, (M, 2) in the map's coordinates: the points inside it."""
        if self.coords is not None:
            self.select_on_map(rows_in_polygon(self.coords, polygon))

    def show_only(self, rows) -> None:
        """Just these rows (a duplicate group, the suggestions to label next); None shows all again."""
        self.group_rows = None if rows is None else np.asarray(rows, np.int64)
        self.apply_filters()

    def pick_group(self, paths) -> None:
        if paths is None or self.results is None:
            self.show_only(None)
            return
        wanted = set(paths)
        self.show_only([i for i, p in enumerate(self.results.paths) if p in wanted])

    def _on_map(self, projected) -> None:
        self.coords, self.map_method = projected
        if len(self.coords):  # the box starts on the middle half of the points
            lo, hi = self.coords.min(0), self.coords.max(0)
            span = np.maximum(hi - lo, 1e-6)
            self.box = (*map(float, lo + 0.25 * span), *map(float, 0.5 * span))
        self.map_ready.emit(self.coords, self.map_method)
        if self.state.follow_map:
            self.apply_filters()
        if self.results.has_predictions:  # after the map: at 100k its kNN took the CPU the map was waiting for
            self.jobs.start("fit", "Model fit", fit_job, self.app.model, self.embedded, self.results,
                            on_result=self._on_fit, on_error=self._on_failed)
        self.jobs.start("scores", "Brain scores", scores_job, self.app.model, self.embedded, list(self.state.paths),
                        on_result=self._on_scores, on_error=self._on_failed)

    def _on_scores(self, scores) -> None:
        self.scores = scores
        self.scores_ready.emit(scores)

    def colour_key(self) -> str:
        """The map's colouring; by given label when the model predicts nothing (a headless model)."""
        by = self.state.colour_by
        colours = by in ("tag", "uniqueness", "representativeness") or self.results is None  # scores of features
        return by if colours or self.results.has_predictions else "given label"

    def select(self, row: int | None) -> None:
        """The current image of the folder; its similar images are looked for at once."""
        self.selected = row
        self.row_selected.emit(row)
        if row is not None:
            self.find_similar(row)

    def find_similar(self, row: int) -> None:
        if self.embedded is None:
            return
        self.jobs.start("similar", "Similar images", similar_job, self.embedded, row,
                        on_result=lambda found: self.similar_ready.emit(row, found), on_error=self._on_failed)

    # -- review --------------------------------------------------------------------------------------------
    def start_review(self, threshold: float | None, labels: dict[str, str]) -> None:
        model, folder = self.app.model, self.folder
        if model is None or folder is None:
            return
        self._say("Reviewing labels and duplicates…")
        self.jobs.start("review", "Label review", review_job, folder, model, threshold, dict(labels),
                        on_yield=self.progress.emit, on_result=self._on_review, on_error=self._on_failed)

    def _on_review(self, report) -> None:
        self.report = report
        self.review_ready.emit(report)
        if report.leaks:
            straddle = "would straddle" if report.made_up_split else "straddle"
            self.app.message.emit("warning", f"{counted(len(report.leaks), 'duplicate group')} {straddle} train/val "
                                  f"({report.split}): see the Duplicates tab, or `vitstudio audit --json`.")
        for note in report.notes:
            self.app.message.emit("info", note)

    def follow_moves(self, moves: dict[str, str]) -> None:
        """The results and the similar-images search follow files a move (or its undo) relocated."""
        if self.results is not None:
            self.results = self.results.relocated(moves)
            self.embedded = replace(self.embedded, paths=self.results.paths)  # same rows, same order
            self.relocated.emit(self.results)
            self.apply_filters()

    def _say(self, line: str, reopen: bool = False) -> None:
        self.line, self.reopen = line, reopen
        self.said.emit(line, reopen)
