"""The Teach tab: a Teach project's classes as cards, samples added from files, a folder or frames held to record
from a video file or camera (the Play tab's readers), the head refitted on a worker after every change (latest wins:
the refit is keyed by model, project, revision and recipe), and the live preview's per-class bars. Everything the
user sets lives in TeachState; what an action does is TeachModel's (vitstudio/app/teach_state.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.analyses import play_methods
from vitstudio.app.play_jobs import is_source_error
from vitstudio.app.teach_jobs import export_job, preview_job, refit_job
from vitstudio.app.teach_state import REFIT_KEY
from vitstudio.gui import file_dialogs

from .. import workers
from ..common.bind import bind
from ..common.method_combo import method_combo
from ..common.type_map import control_for
from ..imaging import pil_to_pixmap
from .class_card import ClassCardWidget
from .confusion_view import ConfusionView
from .teach_words import confirm_delete, exported_line, from_words, mark_maps, preview_caption

VIDEO_FILES = "Videos (*.mp4 *.avi *.mov *.mkv *.webm *.m4v);;All files (*)"
IMAGE_FILES = "Images (*.png *.jpg *.jpeg *.bmp *.webp *.tif *.tiff);;All files (*)"


class TeachPanel(QWidget):
    def __init__(self, app, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state = app.state
        self.teach = app.teach  # the project, its cards and what each action does to it
        self.view_state = self.teach.state
        self.jobs = workers.ViewJobs(self.view_state, {"refit": REFIT_KEY, "preview": ("source", "method"),
                                                       "export": REFIT_KEY},
                                     long=("preview", "export"))
        self.cards: dict[str, ClassCardWidget] = {}
        self._shown, self._latest, self._frame = threading.Event(), None, None
        self._draw_timer = QTimer(self, singleShot=True, interval=0, timeout=self._show_latest)
        self._refit_timer = QTimer(self, singleShot=True, interval=0, timeout=self.refit)
        self._build()
        self.view_state.events.revision.connect(lambda _r: self._refit_timer.start())
        self.view_state.events.recipe.connect(self._on_recipe)
        state.model_loaded.connect(self._on_model)
        if state.model is not None:
            self.view_state.model = state.model.uid

    def _build(self) -> None:
        self.open_button, self.class_button = QPushButton("Open project…"), QPushButton("Add class…")
        self.recipe = control_for(self.view_state.fields()["recipe"])  # each recipe with a refit's expected time
        self.recipe.setSizeAdjustPolicy(QComboBox.AdjustToContents)  # the times change with the samples
        self.augment = control_for(self.view_state.fields()["augment"], title="Augment")
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Write the taught model as a timm run folder, ONNX and the seed format, and "
                                      "check each predicts as the app on every sample")
        top = QHBoxLayout()  # the project's actions; the source's sit above the preview
        for widget in (self.open_button, self.class_button, QLabel("Head"), self.recipe, self.augment,
                       self.export_button):
            top.addWidget(widget)
        top.addStretch(1)
        sources = self._build_sources()
        self.card_list = QVBoxLayout()
        self.card_list.addStretch(1)
        holder = QWidget()
        holder.setLayout(self.card_list)
        scroll = QScrollArea(widgetResizable=True)
        scroll.setWidget(holder)
        # the column as wide as a card: a scroll area's own minimum is a few pixels, so beside the preview the
        # cards were squeezed to ~250 px and scrolled sideways, their bars and Hold to record out of sight
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(ClassCardWidget.minimum_width() + scroll.verticalScrollBar().sizeHint().width()
                               + 2 * scroll.frameWidth() + self.card_list.contentsMargins().left()
                               + self.card_list.contentsMargins().right())
        body = QHBoxLayout()
        body.addWidget(scroll, 3)
        body.addLayout(self._build_preview(sources), 2)
        self.stats = QLabel("Open a Teach project (or any folder of class folders), or a new folder to start one.")
        self.stats.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(body, 1)
        layout.addWidget(self.stats)
        bind(self.recipe, self.view_state, "recipe")
        bind(self.augment, self.view_state, "augment")
        self.view_state.events.augment.connect(self._on_augment)
        bind(self.method, self.view_state, "method")
        self.view_state.events.method.connect(self._restart_preview)
        self.open_button.clicked.connect(self._choose_project)
        self.class_button.clicked.connect(self._ask_class)
        self.video_button.clicked.connect(self._choose_video)
        self.camera_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.export_button.clicked.connect(self._choose_export)

    def _build_preview(self, sources: QVBoxLayout) -> QVBoxLayout:
        """The preview's column: its sources, the frame, the caption under it and the confusion table."""
        self.screen = QLabel("Open a video or a camera to preview the head live, and to record frames into a class "
                             "by holding its button.")
        self.screen.setWordWrap(True)
        self.screen.setAlignment(Qt.AlignCenter)
        self.screen.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Ignored)
        self.screen.setMinimumSize(280, 210)
        self.caption = preview_caption()
        self.confusion = ConfusionView()
        right = QVBoxLayout()
        right.addLayout(sources)
        right.addWidget(self.screen, 3)
        right.addWidget(self.caption)
        right.addWidget(self.confusion, 2)
        return right

    def _build_sources(self) -> QVBoxLayout:
        """The preview's row: a video or a camera, start and stop, and the map drawn over it."""
        self.video_button, self.camera = QPushButton("Open video…"), QComboBox()
        for i in range(4):
            self.camera.addItem(f"Camera {i}", f"camera:{i}")
        self.camera.setToolTip("The preview's source: a camera, or the video opened (Start plays it again)")
        self.camera_button, self.stop_button = QPushButton("Start"), QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.method = QComboBox()  # the map over the preview: off, or one the Play tab draws (the registry's)
        self.method.addItem("No map", None)
        titled = method_combo(play_methods())
        for i in range(titled.count()):
            self.method.addItem(titled.itemText(i), titled.itemData(i))
        source, shown = QHBoxLayout(), QHBoxLayout()  # two rows: the column leaves the cards their width
        for widget in (self.video_button, self.camera, self.camera_button, self.stop_button):
            source.addWidget(widget)
        for widget in (QLabel("Map"), self.method):
            shown.addWidget(widget)
        sources = QVBoxLayout()
        for row in (source, shown):
            row.addStretch(1)
            sources.addLayout(row)
        return sources

    # -- the project ----------------------------------------------------------------------------------
    def open_project(self, folder: str) -> None:
        self.teach.open(folder)
        for name in list(self.cards):  # another project: no card, figure or bar of the previous one stays
            self.cards.pop(name).deleteLater()
        self.confusion.show_result(None)
        self.stats.setText(f"{folder}: teaching…")
        self._show_cards()

    def _choose_project(self) -> None:
        folder = file_dialogs.choose_folder(self, "Open or start a Teach project", create=True)
        if folder:
            self.open_project(folder)

    def _ask_class(self) -> None:
        name, ok = QInputDialog.getText(self, "Add a class", "Class name")
        if ok and name.strip():
            self._act(self.teach.add_class, name.strip())

    def _act(self, action, *args) -> None:
        """A change to the project; a refusal (no project, a bad name, an unreadable file) or a write that failed (a
        full disk: the samples written before it stay, each file whole) is said in the status, in one line."""
        failed = self.teach.attempt(action, *args)
        if failed:
            self.stats.setText(failed[0].upper() + failed[1:])
        self._show_cards()

    def _show_cards(self) -> None:
        cards = self.teach.cards()
        for name in [n for n in self.cards if n not in {c.name for c in cards}]:  # deleted or renamed
            gone = self.cards.pop(name)
            self.card_list.removeWidget(gone)  # out of the list now, not at the deferred delete
            gone.deleteLater()
        for i, card in enumerate(cards):
            widget = self.cards.get(card.name)
            if widget is None:
                widget = self.cards[card.name] = ClassCardWidget(card.name)
                widget.add_files.connect(self._add_files)
                widget.add_folder.connect(self._add_folder)
                widget.record_pressed.connect(self._hold)
                widget.record_released.connect(self._release)
                widget.add_frame.connect(self._add_frame)
                widget.rename.connect(self._rename_class)
                widget.delete.connect(self._delete_class)
                widget.remove_sample.connect(self._remove_sample)
            if self.card_list.indexOf(widget) != i:  # in the project's order (a renamed class moves to its place)
                self.card_list.removeWidget(widget)
                self.card_list.insertWidget(i, widget)
            widget.show_card(card)

    def _remove_sample(self, path: str) -> None:
        self._act(self.teach.remove_sample, path)

    def _rename_class(self, name: str) -> None:
        new, ok = QInputDialog.getText(self, f"Rename {name}", "Class name", text=name)
        if ok and new.strip() and new.strip() != name:
            self._act(self.teach.rename_class, name, new.strip())

    def _delete_class(self, name: str) -> None:
        count = len(self.teach.project.samples.get(name, ())) if self.teach.project is not None else 0
        if confirm_delete(self, name, count):
            self._act(self.teach.delete_class, name)

    def _add_files(self, name: str) -> None:
        paths = file_dialogs.open_files(self, f"Add images to {name}", IMAGE_FILES)
        if paths:
            self._act(self.teach.add_files, name, paths)

    def _add_folder(self, name: str) -> None:
        folder = file_dialogs.choose_folder(self, f"Add a folder of images to {name}")
        if folder:
            self._act(self.teach.add_files, name, [folder])

    def _add_frame(self, name: str) -> None:
        """Lobe's correction: the frame on screen joins the class it belongs to."""
        if self._frame is None:
            self.stats.setText("Open a video or a camera first: the frame on screen is added.")
            return
        self._act(self.teach.add_frames, name, [self._frame])

    def _on_recipe(self, recipe: str) -> None:
        if self.teach.project is not None and self.teach.project.settings.recipe != recipe:
            self.teach.set_recipe(recipe)  # saved with the project; the refit key has changed
            self._refit_timer.start()

    def _on_augment(self, augment: bool) -> None:
        if self.teach.project is not None and self.teach.project.settings.augment != augment:
            self.teach.set_augment(augment)
            self._refit_timer.start()

    # -- the head -------------------------------------------------------------------------------------
    def _on_model(self, model) -> None:
        self.view_state.model = model.uid  # a refit or preview of the previous model is discarded
        self.teach.live_head = None
        for widget in self.cards.values():  # figures and bars were the old model's
            widget.show_accuracy(None, 0)
            widget.show_probability(None)
        self.confusion.show_result(None)
        if self.teach.project is not None:
            self.stats.setText("Teaching…")
        self._refit_timer.start()
        mark_maps(self.method, model)
        self._restart_preview()

    def _restart_preview(self, *_changed) -> None:
        """Another model or map while previewing: the preview goes on with them."""
        if self.view_state.source is not None and self.stop_button.isEnabled():
            self.preview(self.view_state.source)

    def refit(self) -> None:
        if self.state.model is None or self.teach.project is None:
            return
        self.stats.setText("Teaching…")
        self.jobs.start("refit", "Teaching", refit_job, self.state.model, str(self.teach.project.root),
                        self.view_state.recipe, on_result=self._on_fitted, on_error=self._on_refit_error)

    def _on_fitted(self, result) -> None:
        if from_words(result):
            self._on_words(result)
            return
        self.teach.live_head = (result.classes, result.head)
        self._clear_still_bars()
        from vitstudio.app.teach_state import app_model_spec

        self.teach.taught_with(*app_model_spec(self.state))  # `vitstudio teach PROJECT` then uses this model
        self.confusion.show_result(result)
        accuracy, held_out = result.per_class_accuracy(), result.held_out()
        for name, widget in self.cards.items():
            widget.show_accuracy(accuracy.get(name), held_out.get(name, 0))
        wrong, advice = len(result.wrong()), result.record_next()
        self.stats.setText(f"{result.head.recipe} head on {len(result.split.train)} samples in "
                           f"{result.fit_seconds:.2f} s · validation {result.val_accuracy:.1%} of "
                           f"{len(result.split.val)} held out (15 % of each class)" +
                           (f" · the card names alone (zero-shot): {result.words_accuracy:.1%}"
                            if result.words_accuracy is not None else "") +
                           (f" · {wrong} wrong" if wrong else "") +
                           (f" · record more of {advice[0]} (taken for {advice[1]})" if advice else "") +
                           (f" · {result.validation_note()}" if result.validation_note() else ""))

    def _on_words(self, head) -> None:
        """A CLIP-style model before every class has two samples: the preview shows the card names' zero-shot head."""
        self.teach.live_head = (head.classes, head)
        self._clear_still_bars()
        self.confusion.show_result(None)
        for widget in self.cards.values():
            widget.show_accuracy(None, 0)
        self.stats.setText(f"Showing {head.how}; the head taught on your samples takes over once every class has "
                           f"two.")

    def _clear_still_bars(self) -> None:
        """A new head while no preview runs: the bars were the old head's numbers for the frame left on screen."""
        if self.stop_button.isEnabled():
            return  # the next frame shows the new head's
        for widget in self.cards.values():
            widget.show_probability(None)
        if self._frame is not None:
            self.caption.setText("The head has changed: Start the preview to see it on the frames.")

    def _on_refit_error(self, exc: BaseException) -> None:
        if isinstance(exc, ValueError):  # a class with too few samples, a model teach cannot take: said here
            self.stats.setText(str(exc))
            return
        self.state.report(exc, "Teach")

    # -- preview and hold to record ---------------------------------------------------------------------
    def _choose_video(self) -> None:
        path = file_dialogs.open_file(self, "Open a video", VIDEO_FILES)
        if path:
            self.preview(path)

    def start(self) -> None:
        """Start: the source chosen beside it (a video that ended plays again; a camera is picked in the list)."""
        self.preview(self.camera.currentData())

    def _choose_source(self, source: str) -> None:
        """The source list shows what plays: a video opened is its first entry (chosen), the cameras follow."""
        index = self.camera.findData(source)
        if index < 0 and source.startswith("camera:"):
            self.camera.addItem(f"Camera {source.partition(':')[2]}", source)
            index = self.camera.count() - 1
        elif index < 0:
            if not self.camera.itemData(0).startswith("camera:"):
                self.camera.removeItem(0)  # one video at a time: the one opened last
            self.camera.insertItem(0, Path(source).name, source)
            self.camera.setItemData(0, source, Qt.ToolTipRole)
            index = 0
        self.camera.setCurrentIndex(index)

    def preview(self, source: str) -> None:
        if self.state.model is None:
            self.state.message.emit("warning", "Load a model first.")
            return
        self._choose_source(source)
        self.view_state.source = source
        self._shown.set()  # a preview still winding down stops waiting for the screen
        self._shown, self._latest = threading.Event(), None
        self.stop_button.setEnabled(True)
        self.jobs.start("preview", "Teach preview", preview_job, self.state.model, source, self.view_state.method,
                        self.teach, self._shown,
                        on_yield=self._on_frame, on_result=self._on_preview_end, on_error=self._on_preview_error)

    def stop(self) -> None:
        self.jobs.discard("preview")
        self._shown.set()
        self.stop_button.setEnabled(False)
        self._release(self.view_state.record_to)

    def _hold(self, name: str) -> None:
        if not self.stop_button.isEnabled():
            self.stats.setText("Open a video or a camera first: held frames come from the preview.")
            return
        self.teach.hold(name)

    def _release(self, _name: str | None = None, why: str | None = None) -> None:
        said = self.teach.finish_hold(why)
        if said is not None:
            self._show_cards()
            self.stats.setText(said)

    def _on_frame(self, value) -> None:
        frame, time_s = value[:2]
        self.teach.offer(time_s, frame)  # kept only while record is held, at the project's rate
        self._latest = value
        self._draw_timer.start()

    def _show_latest(self) -> None:
        value, self._latest = self._latest, None
        if value is None:
            return
        frame, _time_s, probs, fps, picture, caption = value
        self._frame = frame
        self.caption.setText(caption)
        pixmap = pil_to_pixmap(picture)  # the frame, the map if one is chosen, the top class and frames/s
        self.screen.setPixmap(pixmap.scaled(self.screen.size(), Qt.KeepAspectRatio, Qt.SmoothTransformation))
        for name, widget in self.cards.items():
            widget.show_probability(None if probs is None else probs.get(name))
        if fps:
            self.screen.setToolTip(f"preview: {fps:.1f} frames/s")
        self._shown.set()

    def _on_preview_end(self, _read: int) -> None:
        self._show_latest()
        self.stop_button.setEnabled(False)
        camera = (self.view_state.source or "").startswith("camera:")
        why = "The camera stopped sending frames (unplugged, or taken by another program)" if camera else None
        if why:
            self.screen.setText(why + ".")
        else:
            self.caption.setText("The video ended: Start plays it again.")
        self._release(why=why or "The video ended")  # while held: what was recorded is kept

    def _on_preview_error(self, exc: BaseException) -> None:
        self.stop_button.setEnabled(False)
        self._release(why=" ".join(str(exc).split()).rstrip("."))  # a source gone mid-recording: frames kept
        if is_source_error(exc):
            self.screen.setText(str(exc))
            return
        self.state.report(exc, "Teach")

    # -- export, proven equal ---------------------------------------------------------------------------
    def _choose_export(self) -> None:
        folder = file_dialogs.choose_folder(self, "Export the taught model to", create=True)
        if folder:
            self.export(folder)

    def export(self, folder: str) -> None:
        result = self.jobs.current("refit")
        if result is not None and from_words(result):
            self.stats.setText("The preview shows the card names' zero-shot head, which no file can hold as it is: "
                               "add two samples to every class to teach a head to export.")
            return
        if result is None or self.state.model is None:
            self.stats.setText("Nothing taught yet for this model and these samples: wait for the refit.")
            return
        if result.head.recipe != "quick":
            self.stats.setText("Teachable Machine's two-layer head has no place in a timm ViT's head: switch the "
                               "head to the quick one to export.")
            return
        self.stats.setText(f"Exporting to {folder} and running every artefact on all {len(result.paths)} samples…")
        self.jobs.start("export", "Teach export", export_job, self.state.model, result, folder,
                        on_result=self._on_exported, on_error=self._on_export_error)

    def _on_export_error(self, exc: BaseException) -> None:
        if isinstance(exc, (ValueError, OSError)):  # an exporter's refusal, a full disk: said where the user looks
            self.stats.setText(f"Export failed: {exc}")
            return
        self.state.report(exc, "Teach export")

    def _on_exported(self, exported) -> None:
        self.stats.setText(exported_line(exported))
