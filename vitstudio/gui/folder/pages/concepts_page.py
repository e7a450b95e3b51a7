"""The Folder tab's Concepts page: learn a sparse autoencoder on the opened folder's patch tokens (in the
background, with R², L0 and dead concepts as it learns; pause, stop and resume), or open a concepts file; then browse
the concepts (`concept_browser.py`) and read them on the current image (`concept_image.py`). The twin of
`vitstudio concepts FOLDER --model M`: the same settings (one schema) give the same concepts. Drawn from its model
(`vitstudio.app.pages.concepts.ConceptsModel`)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.concept_jobs import poor_fit_warning
from vitstudio.app.pages.concepts import SETTINGS, ConceptsModel

from ... import file_dialogs
from ...common.bind import bind
from ...common.job_progress import show_progress
from ...common.small_plot import SmallPlotWidget
from ...common.type_map import SettingControl
from ..concepts.concept_browser import ConceptBrowserWidget
from ..concepts.concept_image import ConceptImageWidget


def scrolled(page: QWidget) -> QScrollArea:
    """A page in a scroll area of its own: its wrapped text never makes the Folder tab ask for more height."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.NoFrame)
    area.setWidget(page)
    return area


class ConceptsPage(QWidget):
    page_id = "concepts"

    def __init__(self, model: ConceptsModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model  # settings, learning, the concepts shown
        self.view_state, self.settings_state, self.jobs = self.model.state, self.model.settings_state, self.model.jobs
        self._build()
        self.browser.concept_selected.connect(self.select_concept)
        self.on_image.concept_selected.connect(self.select_concept)
        self.on_image.show_requested.connect(model.show_in_attention)  # the window routes it to the Attention tab
        self.model.changed.connect(self._show)
        self.model.progress.connect(self._on_progress)
        self.model.stopped.connect(self._on_stopped)
        self.model.opened.connect(self._on_opened)
        self._idle()

    def _build(self) -> None:
        """Three pages, so that each has the side tab's whole height at 1280×720: Learn (the four main settings on a
        2 × 2 grid, the others folded, the R² curve), Browse and On the image."""
        self.controls = {s.name: SettingControl(s) for s in SETTINGS}
        self.bindings = {n: bind(c, self.settings_state, n) for n, c in self.controls.items()}
        grid, self.more = QGridLayout(), QCheckBox("More settings")
        more_body = QWidget()
        more_form = QFormLayout(more_body)
        more_form.setContentsMargins(0, 0, 0, 0)
        self.more.toggled.connect(more_body.setVisible)
        more_body.setVisible(False)
        main = [c for c in self.controls.values() if not c.setting.advanced]
        for i, c in enumerate(main):
            grid.addWidget(QLabel(c.label), i // 2, 2 * (i % 2))
            grid.addWidget(c.widget, i // 2, 2 * (i % 2) + 1)
        for c in self.controls.values():
            if c.setting.advanced:
                more_form.addRow(c.label, c.widget)
        self.learn_button, self.pause_button = QPushButton("Learn concepts"), QPushButton("Pause")
        self.stop_button, self.open_button = QPushButton("Stop"), QPushButton("Open file…")
        self.learn_button.setToolTip("A TopK sparse autoencoder on the folder's patch tokens (cached per model and "
                                     "block); a stopped run resumes where it stopped")
        self.pause_button.setCheckable(True)
        self.progress, self.note = QProgressBar(), QLabel()
        self.note.setWordWrap(True)
        self.plot = SmallPlotWidget()
        self.plot.setLabel("left", "R²")
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.setMinimumHeight(70)
        self.browser, self.on_image = ConceptBrowserWidget(self), ConceptImageWidget(self)
        self.learn_page, self.pages = QWidget(), QTabWidget()
        for page, title in ((self.learn_page, "Learn"), (self.browser, "Browse"), (self.browser.map, "Map"),
                            (self.on_image, "On the image")):
            self.pages.addTab(scrolled(page), title)
        buttons = QHBoxLayout()
        for button in (self.learn_button, self.pause_button, self.stop_button, self.open_button):
            buttons.addWidget(button)
        box = QVBoxLayout(self.learn_page)
        box.addLayout(grid)
        box.addWidget(self.more)
        box.addWidget(more_body)
        box.addLayout(buttons)
        box.addWidget(self.progress)
        box.addWidget(self.note)
        box.addWidget(self.plot, 1)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(2, 2, 2, 2)
        outer.addWidget(self.pages)
        self.learn_button.clicked.connect(self.start)
        self.pause_button.toggled.connect(self._pause)
        self.stop_button.clicked.connect(self.stop)
        self.open_button.clicked.connect(self._choose_file)

    # -- what is shown ----------------------------------------------------------------------------------------------
    @property
    def concepts(self):
        """The Concepts of the current model and file, or None."""
        return self.model.concepts

    learning = property(lambda self: self.model.learning)
    curve = property(lambda self: self.model.curve)

    def settings(self):
        return self.model.settings()

    def _idle(self, text: str | None = None) -> None:
        folder = self.model.folder.folder
        self.progress.setVisible(False)
        self.pause_button.setEnabled(False)
        self.stop_button.setEnabled(False)
        self.learn_button.setEnabled(self.model.can_learn())
        self.open_button.setEnabled(self.model.app.model is not None)
        if text is None and self.concepts is None:
            text = ("Open a folder to learn what the model sees in it: concepts, each a direction in one block's "
                    "patch tokens that fires on one thing." if folder is None else
                    "Learn concepts on this folder, or open a concepts file learned on this model.")
        if text is not None:
            self.note.setText(text)

    # -- learning -------------------------------------------------------------------------------------------------
    def start(self) -> None:
        refused = self.model.start()
        if refused is not None:
            self.note.setText(refused)
            return
        self.learn_button.setEnabled(False)
        self.pause_button.setEnabled(True)
        self.stop_button.setEnabled(True)
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        self.note.setText("Reading the folder's tokens…")

    def _pause(self, paused: bool) -> None:
        if self.model.learning is None:
            return
        self.model.pause(paused)
        self.pause_button.setText("Resume" if paused else "Pause")

    def stop(self) -> None:
        """Stop: the training keeps its checkpoint, and Learn with the same settings resumes it."""
        self.model.stop()
        self.pause_button.setChecked(False)

    def _on_progress(self, p) -> None:
        show_progress(self.progress, self.note, p)
        if self.model.curve:
            self.plot.clear()
            self.plot.plot(np.arange(1, len(self.curve) + 1), self.curve, pen=pg.mkPen("#1f77b4", width=2))

    def _on_stopped(self, line: str) -> None:
        self.pause_button.setChecked(False)
        self._idle(line)

    # -- a concepts file ---------------------------------------------------------------------------------------------
    def _choose_file(self) -> None:
        path = file_dialogs.open_file(self, "Open a concepts file", "Concepts (*.safetensors)")
        if path:
            self.open_file(path)

    def open_file(self, path: str) -> None:
        self.model.open_file(path)

    def _on_opened(self, concepts) -> None:
        self._show()
        if not poor_fit_warning(concepts):  # a poor fit stays on Learn, where its warning says what to change
            self.show_page(self.browser)

    def show_page(self, page: QWidget) -> None:
        """The page (Learn, the browser, its map, the image page) in front."""
        for i in range(self.pages.count()):
            if self.pages.widget(i).widget() is page:
                self.pages.setCurrentIndex(i)

    def select_concept(self, index: int, picked: bool = True) -> None:
        self.model.select(index, picked)
        self.browser.show_concept(index)
        self.on_image.refresh()

    def _show(self) -> None:
        concepts = self.concepts
        if not self.model.curve:  # another model's learning curve goes with its concepts
            self.plot.clear()
        self.browser.set_concepts(concepts)
        self.on_image.refresh()
        if concepts is None:
            if not self.jobs.running("learn"):
                self._idle()
            return
        t = concepts.meta.get("training", {})
        data = concepts.meta.get("data", {})
        self._idle(f"{concepts.size} concepts of block {concepts.layer} ({concepts.sae.k} active per patch) "
                   f"from {data.get('images', '?')} images: R² {t.get('r2', float('nan')):.3f}, "
                   f"L0 {t.get('l0', float('nan')):.1f}, {t.get('dead', '?')} dead."
                   + (f"\n⚠ {warning}" if (warning := poor_fit_warning(concepts)) else ""))
        self.note.setToolTip(self.view_state.file)


PAGE = ConceptsPage
