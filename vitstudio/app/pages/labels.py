"""The Folder tab's Labels page, Qt-free: label an unlabelled folder in the app. The rows selected (the App's
selection: the table's, the gallery's), else what is selected on the map, become a class — "Label as…" a new or
existing one (the page offers its guess first), or keys 1–9 over the table for the classes in order; "Train" fits the
quick head on the cached features of what is labelled so far (the Map page draws its predictions); "Suggest next"
leaves in the table just the images whose labels would teach it most. The labels are the App's records
(`folder.labels`, app/folder_labels.py: their file in the app's data folder, keyed by the folder, which is never
written); each labelling is a command on the app's one undo stack. "Train a model…" hands the labels file to the
Training tab. What the page says follows the labels, the head, the suggestions and the filters; nothing of another
folder's stays."""

from __future__ import annotations

import os

from vitstudio.core.files import counted

from ..evented import Event, EventedModel
from . import PageEntry

HINT = ("Open a folder: label its images here (select rows or the map's box, then Label as… or keys 1–9), then "
        "Train.")
KEYS = 9  # keys 1–9 label the selected rows as the classes in the order first given


class LabelsModel(EventedModel):
    changed = Event("what the page says or offers changed: draw again")
    train_requested = Event("the labels file: the Training tab takes it as its dataset")

    title = "Labels"
    tooltip = "Label images here, fit a quick head, label what it suggests"

    def __init__(self, folder) -> None:
        """`folder`: the Folder model, holding the App's labels (`folder.labels`) and selection (`folder.selection`)."""
        self.folder, self.records = folder, folder.labels
        self.note: tuple = ()  # the last action's news: ("fitting",), ("head", labelled), ("suggested", n)
        self.records.changed.connect(self._on_labels)
        self.records.head_ready.connect(self._on_head)
        self.records.suggested.connect(self._on_suggested)
        self.records.warned.connect(self.warn)
        folder.rows_changed.connect(self._on_rows)

    def show(self, _results) -> None:
        """The records follow the folder's results (another folder's labels file); the page follows them."""

    # -- what the page shows -------------------------------------------------------------------------------------
    def ready(self) -> bool:
        """Labelling is possible: results shown and a file to keep the labels in."""
        return self.records.ready()

    def classes(self) -> list[str]:
        return self.records.classes()

    def counts(self) -> dict[str, int]:
        """Each class, in key order, with how many images it has."""
        counts = dict.fromkeys(self.classes(), 0)
        for label in self.records.labels.values():
            counts[label] += 1
        return counts

    def line(self) -> str:
        """How far the labelling is, or what to do first."""
        if not self.ready():
            return HINT
        where = os.path.basename(self.records.path)
        return f"{len(self.records.labels)} of {len(self.folder.results)} images labelled ({where})."

    def _on_labels(self) -> None:
        self.note = ()
        self.changed.emit()

    def _on_head(self, head) -> None:
        self.note = ("head", head.labelled)
        self.changed.emit()

    def _on_suggested(self, rows) -> None:
        self.note = ("suggested", len(rows))
        self.changed.emit()

    def _on_rows(self, _rows) -> None:
        """Reset filters shows every row: the suggestions are no longer what the table shows."""
        if self.note[:1] == ("suggested",) and self.folder.group_rows is None:
            self.note = ()
            self.changed.emit()

    def warn(self, text: str) -> None:
        self.folder.app.message.emit("warning", text)

    # -- labelling -----------------------------------------------------------------------------------------------
    def selected_paths(self) -> list[str]:
        """The rows selected (the App's selection), else those selected on the map (a box dragged, a lasso)."""
        results = self.folder.results
        if results is None:
            return []
        rows = self.folder.selection.rows if self.folder.selection is not None else []
        if not rows and self.folder.map_rows is not None:
            rows = list(self.folder.map_rows)
        return [results.paths[int(r)] for r in rows]

    def paths_to_label(self) -> list[str]:
        """`selected_paths()`, or none, with a line saying what to select first."""
        paths = self.selected_paths()
        if not paths:
            self.warn("Select images first: rows of the table, or the map's box.")
        return paths

    def offered(self, paths: list[str]) -> tuple[list[str], int]:
        """The classes Label as… offers for `paths`, and which comes first: the guess (the class folder they are in,
        the quick head's class, the model's top-1: `FolderLabels.guess`), added when it is no class yet."""
        classes, guess = self.classes(), self.records.guess(paths)
        options = classes + [guess] if guess and guess not in classes else classes
        return options, options.index(guess) if guess else 0

    def label(self, paths: list[str], label: str | None) -> bool:
        """`paths` labelled `label` (None: unlabelled), a command on the app's undo stack; False, said, with no
        labels file (no folder open)."""
        return self.records.label(paths, label)

    def label_as_number(self, number: int) -> None:
        """Key `number` over the table: the selected rows become the class of that key."""
        classes = self.classes()
        if number > len(classes):
            self.warn(f"There are {len(classes)} classes: keys 1–{len(classes)} label the selected rows; Label "
                      "selection as… adds a class.")
            return
        paths = self.selected_paths()
        if paths:
            self.records.label(paths, classes[number - 1])

    def use_file(self, path: str) -> None:
        self.records.use_file(path)

    # -- the quick head, suggestions, training ---------------------------------------------------------------------
    def train(self) -> None:
        """Fit the quick head (a script's runner has fitted it when this returns: the head is said then)."""
        before, self.note = self.note, ("fitting",)
        if not self.records.train():
            self.note = before
        elif self.note == ("fitting",):
            self.changed.emit()

    def suggest_next(self) -> None:
        self.records.suggest_next()

    def request_training(self) -> None:
        """The labels file as the Training tab's dataset."""
        self.train_requested.emit(self.records.path or "")

    def describe(self) -> str:
        """The line for what happened last, if it is still so: fitting, the head drawn on the map, the suggestions
        in the table (`note`), else `line()`."""
        kind = self.note[:1]
        if kind == ("fitting",):
            return "Fitting the quick head…"
        if kind == ("suggested",):
            return f"The table shows the {counted(self.note[1], 'image')} to label next (Reset filters shows all)."
        return self.line()


PAGE = PageEntry("labels", "Label", LabelsModel, rank=10)
