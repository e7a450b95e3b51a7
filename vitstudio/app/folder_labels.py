"""Labels made in the app for a folder's images, Qt-free: the labels file (default: the app's data folder, keyed by the
folder; the folder itself is never written), the labels, the quick head fitted on the cached features of what is
labelled, and the images to label next. They follow the Folder model: other results (another folder or model) open
that folder's labels again and drop the head (it was fitted on the previous model's features)."""

from __future__ import annotations

import collections

import numpy as np

from vitstudio.core.files import counted

from .evented import Event, EventedModel
from .jobs import KeyedSlot, Runner

SUGGEST_N = 9


def label_head_job(cancel, features, paths: list[str], labels: dict[str, str]):
    from vitstudio.core.train.labelling import fit_label_head

    return fit_label_head(features, paths, labels)


def suggest_job(cancel, features, paths: list[str], labels: dict[str, str], n: int):
    from vitstudio.core.train.labelling import class_order
    from vitstudio.core.train.suggest import suggest

    classes = {c: i for i, c in enumerate(class_order(labels))}
    y = np.asarray([classes.get(labels.get(p), -1) for p in paths], np.int64)
    return [s.index for s in suggest(features, y, n, num_classes=max(len(classes), 1))]


def class_order(labels: dict[str, str]) -> list[str]:
    from vitstudio.core.train.labelling import class_order as order

    return order(labels)


class LabelCommand:
    """Give `paths` the label `label` (None: unlabel); undo restores each one's previous label. With `memo` (a
    label-review item relabelled: `remove()`, `put_back()`), the item leaves the review's list and comes back on
    undo."""

    def __init__(self, labels: FolderLabels, paths: list[str], label: str | None, memo=None) -> None:
        name = f"'{label}'" if label else "no label"
        self.text = f"Label {counted(len(paths), 'image')} as {name}"
        self.labels, self.paths, self.label, self.memo = labels, list(paths), label, memo
        self.before = {p: labels.labels.get(p) for p in self.paths}

    def redo(self) -> None:
        self.labels.apply({p: self.label for p in self.paths})
        if self.memo is not None:
            self.memo.remove()

    def undo(self) -> None:
        self.labels.apply(self.before)
        if self.memo is not None:
            self.memo.put_back()


class FolderLabels(EventedModel):
    changed = Event("the labels or their file changed")
    head_ready = Event("LabelHead")
    warned = Event("a line for the user: what to do first")
    suggested = Event("the rows to label next (the Folder model shows just those)")

    def __init__(self, folder_model, runner: Runner) -> None:
        self.folder = folder_model
        self.path: str | None = None  # the labels file
        self.labels: dict[str, str] = {}
        self.head = None  # the quick head of the labels as they were when it was fitted
        self.slot = KeyedSlot(runner)
        folder_model.results_changed.connect(self._on_results)

    def _on_results(self, results) -> None:
        self.open_for(self.folder.folder if results is not None else None)

    def open_for(self, folder: str | None) -> None:
        """The labels of `folder` (its default file in the data folder), read again after a restart."""
        from vitstudio.core.train.labelling import default_labels_path, load_labels

        self.head = None
        self.slot.cancel()
        self.path = str(default_labels_path(folder)) if folder else None
        self.labels = load_labels(self.path) if self.path else {}
        self.changed.emit()

    def use_file(self, path: str) -> None:
        """Keep the labels in `path`: an existing file's labels join those made here."""
        from vitstudio.core.train.labelling import load_labels

        self.path = path
        self.labels.update(load_labels(path))
        self._save()
        self.changed.emit()

    def classes(self) -> list[str]:
        return class_order(self.labels)

    def ready(self) -> bool:
        """Labelling is possible: results shown and a file to keep the labels in."""
        return self.folder.results is not None and self.path is not None

    def apply(self, changes: dict[str, str | None]) -> None:
        """Give each path its label (None: unlabel); the undo stack of a face keeps what they were before."""
        for path, label in changes.items():
            if label is None:
                self.labels.pop(path, None)
            else:
                self.labels[path] = label
        self.head = None  # it was of the previous labels
        self._save()
        self.changed.emit()

    def label(self, paths: list[str], label: str | None, memo=None) -> bool:
        """Label `paths` as a command on the app's undo stack (Edit → Undo); False, with a warning, while there is no
        labels file (no folder open)."""
        if self.path is None:
            self.warned.emit("Open a folder first.")
            return False
        self.folder.undo.push(LabelCommand(self, paths, label, memo))
        return True

    def _save(self) -> None:
        from vitstudio.core.train.labelling import save_labels

        if self.path is not None:
            results = self.folder.results
            save_labels(self.path, self.labels, list(results.paths) if results is not None else [])

    def guess(self, paths: list[str]) -> str | None:
        """The class `paths` most likely are, offered first by Label as…: the class folder they are in (in a folder
        of class folders the folder says more than any model, and it names the class whether or not it is one made
        yet), else the quick head's when it is trained, else the model's top-1 while no class is made yet or when
        it is one of the classes made (an ImageNet class is no guess among the user's own)."""
        results, classes = self.folder.results, self.classes()
        if results is None or not paths:
            return None
        row_of = {path: row for row, path in enumerate(results.paths)}
        rows = [row_of[p] for p in paths if p in row_of]
        foldered = len(set(results.given) - {""}) > 1  # one folder of all the images names no class
        names = [results.given[r] for r in rows if results.given[r]] if foldered else []
        if not names and self.head is not None:
            names = [self.head.classes[int(self.head.predicted[r])] for r in rows]
        elif not names:
            predicted = results.predicted_labels()
            names = [str(predicted[r]) for r in rows if predicted[r] and (not classes or predicted[r] in classes)]
        return collections.Counter(names).most_common(1)[0][0] if names else None

    def _inputs(self):
        embedded, results = self.folder.embedded, self.folder.results
        if embedded is None or results is None:
            return None
        return embedded.features_of(), list(results.paths), dict(self.labels)

    def train(self) -> bool:
        """Fit the quick head on what is labelled (in the background); False, with a warning, when it cannot."""
        inputs = self._inputs()
        if inputs is None or len(self.classes()) < 2:
            self.warned.emit("Label images of at least two classes first.")
            return False
        self.slot.start(("train", tuple(sorted(self.labels.items()))), "Quick head", label_head_job, *inputs,
                        on_result=self._on_head, on_error=self.folder.app.report)
        return True

    def _on_head(self, head) -> None:
        self.head = head
        self.head_ready.emit(head)

    def suggest_next(self, n: int = SUGGEST_N) -> None:
        """The images whose labels would teach the head most: the Folder model shows just those rows."""
        inputs = self._inputs()
        if inputs is not None:
            self.slot.start(("suggest", tuple(sorted(self.labels.items()))), "Suggesting", suggest_job, *inputs, n,
                            on_result=self._on_suggested, on_error=self.folder.app.report)

    def _on_suggested(self, rows: list[int]) -> None:
        self.folder.show_only(rows)  # as a picked duplicate group: just these rows
        self.suggested.emit(rows)
