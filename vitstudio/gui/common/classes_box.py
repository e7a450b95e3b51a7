"""The model bar's "Classes" box: class names typed as words become the head of a CLIP-style model.

Shown only while a model with a text tower is loaded (OpenCLIP, core/models/openclip.py). Applying runs the text
tower off the GUI thread (`workers.start_job`); the result is a new LoadedModel (a new uid), set as the app's model,
so predictions, the folder table, sort, audit and Compare all use the classes without knowing where they came from.
"""

from __future__ import annotations

import functools
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from vitstudio.core.models.openclip import is_clip_style, text_side
from vitstudio.core.models.zeroshot import parse_classes, with_classes

from .. import workers
from ..state import AppState


def _zero_shot_job(cancel, loaded, names: list[str], prompt: str | None):
    return with_classes(loaded, names, prompt)


class ClassesWidget(QWidget):
    def __init__(self, state: AppState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.job = None
        self.classes = QLineEdit()
        self.classes.setPlaceholderText("Classes (comma-separated), e.g. ant, bee, wasp")
        self.classes.setToolTip("Class names in words: the text tower turns them into a classifier, no training")
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
        self.setVisible(is_clip_style(loaded))
        if is_clip_style(loaded):
            self.status.setText(f"{len(loaded.labels)} classes" if loaded.labels else "no classes yet")

    def use_folder(self, folder: str | Path) -> None:
        """Fill the box with the names of `folder`'s subfolders (a dataset of class folders)."""
        names = sorted(p.name for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith("."))
        self.classes.setText(", ".join(names))

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder of class subfolders")
        if folder:
            self.use_folder(folder)

    def apply(self) -> None:
        loaded = self.state.model
        if loaded is None or not is_clip_style(loaded):
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
        self.job = workers.start_job("Encoding classes", functools.partial(_zero_shot_job, loaded=loaded, names=names,
                                                                           prompt=prompt),
                                     on_result=self._on_classes, on_error=self._on_failed)

    def _on_classes(self, loaded) -> None:
        self.job = None
        current = self.state.model
        if current is None or text_side(current.model) is not text_side(loaded.model):
            return  # another model was loaded meanwhile: these classes belong to the one it replaced
        self.state.set_model(loaded)

    def _on_failed(self, exc: BaseException) -> None:
        self.job = None
        self.status.setText("")
        self.state.report(exc, "Classes")
