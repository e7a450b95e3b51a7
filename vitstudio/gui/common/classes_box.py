"""The model bar's "Classes" box: class names typed as words become the head of a CLIP-style model.

Shown only while a model with a text tower is loaded (OpenCLIP, core/models/openclip.py). Applying runs the text
tower off the GUI thread (`workers.start_job`); the result is a new LoadedModel (a new uid), set as the app's model,
so predictions, the folder table, sort, audit and Compare all use the classes without knowing where they came from.
"""

from __future__ import annotations

import functools
from pathlib import Path
from urllib.parse import quote

from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from vitstudio.app.app_state import AppState
from vitstudio.app.window_jobs import zero_shot_job
from vitstudio.gui import file_dialogs

from .. import workers
from ..app_settings import app_settings

# The core's CLIP helpers (openclip, zeroshot) import torch: they are imported where they are used (through
# app/model_facts.py), so the model bar can be built before torch has loaded (the window shows at once; app.py).


class ClassesWidget(QWidget):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.job = None
        self._pending = ("", "")
        self.classes = QLineEdit()
        self.classes.setPlaceholderText("Classes (comma-separated), e.g. ant, bee, wasp")
        self.classes.setToolTip("Class names in words: the text tower turns them into a classifier, no training. "
                                "Empty it and press Set classes to go back to the model without classes.")
        self.prompt = QLineEdit()
        self.prompt.setPlaceholderText("Prompt (default: the model's templates)")
        self.prompt.setToolTip('One template with {} for the name, e.g. "a photo of a {}"; "{}" = the raw names. '
                               "Empty: the model's own templates, else OpenCLIP's 80 ImageNet ones, averaged.")
        self.apply_button = QPushButton("Set classes")
        self.folder_button = QPushButton("From folder…")
        self.folder_button.setToolTip("The names of a folder's subfolders as the classes")
        self.status = QLabel()
        self.classes.returnPressed.connect(self.apply)
        self.prompt.returnPressed.connect(self.apply)
        self.apply_button.clicked.connect(self.apply)
        self.folder_button.clicked.connect(self._choose_folder)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Classes"))
        row.addWidget(self.classes, 3)
        row.addWidget(self.prompt, 2)
        row.addWidget(self.folder_button)
        row.addWidget(self.apply_button)
        row.addWidget(self.status)
        state.model_loaded.connect(self._on_model_loaded)
        self.setVisible(False)

    def _on_model_loaded(self, loaded) -> None:
        from vitstudio.app.model_facts import is_clip_style

        self.setVisible(is_clip_style(loaded))
        if not is_clip_style(loaded):
            return
        if loaded.labels:
            self.status.setText(f"{len(loaded.labels)} classes")
            return
        saved = remembered(loaded.name)
        if saved is None:  # the box shows what this model classifies into: nothing yet
            self.classes.clear()
            self.status.setText("no classes yet")
            return
        self.classes.setText(saved[0])  # the classes this model had last time (also after a restart)
        self.prompt.setText(saved[1])
        self.apply()

    def use_folder(self, folder: str | Path) -> bool:
        """Fill the box with the names of `folder`'s subfolders (a dataset of class folders); False (said in the
        status) when it has fewer than two."""
        names = sorted(p.name for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith("."))
        if len(names) < 2:
            self.status.setText(f"{Path(folder).name} has {len(names)} class folder(s)")
            return False
        self.classes.setText(", ".join(names))
        return True

    def _choose_folder(self) -> None:
        folder = file_dialogs.choose_folder(self, "Folder of class subfolders")
        if folder and self.use_folder(folder):
            self.apply()  # one click: the folder names become the classes

    def apply(self) -> None:
        from vitstudio.app.model_facts import is_clip_style, parse_classes, without_classes

        loaded = self.state.model
        if loaded is None or not is_clip_style(loaded):
            return
        if not self.classes.text().strip() and loaded.labels:  # an empty box: back to the model without classes
            forget(loaded.name)
            self.state.set_model(without_classes(loaded))
            return
        try:
            names = parse_classes(self.classes.text())
        except ValueError as exc:
            self.state.report(exc, "Classes")
            return
        if self.job is not None:
            self.job.discard()  # the latest classes win
        self.status.setText("encoding classes…")
        prompt = self.prompt.text().strip() or None
        self._pending = (", ".join(names), prompt or "")  # remembered once the text tower accepted them
        self.job = workers.start_job("Encoding classes", functools.partial(zero_shot_job, loaded=loaded, names=names,
                                                                           prompt=prompt),
                                     on_result=self._on_classes, on_error=self._on_failed)

    def _on_classes(self, loaded) -> None:
        from vitstudio.app.model_facts import text_side

        self.job = None
        current = self.state.model
        if current is None or text_side(current.model) is not text_side(loaded.model):
            return  # another model was loaded meanwhile: these classes belong to the one it replaced
        remember(loaded.name, *self._pending)
        self.state.set_model(loaded)

    def _on_failed(self, exc: BaseException) -> None:
        self.job = None
        current = self.state.model
        self.status.setText(f"{len(current.labels)} classes" if current is not None and current.labels else "")
        self.state.report(exc, "Classes")


def remembered(spec: str) -> tuple[str, str] | None:
    """(classes, prompt) last set for the model `spec`, or None."""
    value = app_settings().value(_key(spec))
    return (str(value[0]), str(value[1])) if isinstance(value, (list, tuple)) and len(value) == 2 else None


def remember(spec: str, classes: str, prompt: str) -> None:
    app_settings().setValue(_key(spec), [classes, prompt])


def forget(spec: str) -> None:
    app_settings().remove(_key(spec))


def _key(spec: str) -> str:
    return "classes/" + quote(spec, safe="")  # a path's slashes would be read as settings groups
