"""The main window: model bar, image strip, predictions, model card and log; drag and drop; shutdown."""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QDockWidget,
    QFormLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.app import App
from vitstudio.app.app_state import make_entry
from vitstudio.app.window_jobs import classify_job
from vitstudio.core.data.images import ImageReadError, read_image, to_rgb
from vitstudio.core.files import counted

from . import workers
from .actions import build_menus
from .app_settings import app_settings, list_value, restore_window, save_window
from .closing import CloseGuard
from .common.image_strip import ImageStripWidget
from .common.model_marks import mark_like_the_model_bar
from .common.model_panel import ModelCardView, ModelPanel
from .common.scrolling_tabs import ScrollingTabWidget, scrolling
from .common.wheel_guard import install_wheel_guard
from .edit_menu import fill_edit_menu
from .error_indicator import ErrorIndicatorWidget
from .folder.folder_work_dialog import restore_folder_work
from .imaging import configure_pyqtgraph
from .opening import Opening, StripPaths, read_new_images, recent_entry, updated_recent
from .panel_routes import PanelRoutes
from .session_memory import WindowMemory
from .status_notice import PassingMessages, StatusNoticeWidget
from .tab_names import TABS
from .window_jobs import Relay, is_model_of

log = logging.getLogger("vitstudio.gui")
# The window frame (menus, model bar, image strip, tabs, docks) needs Qt only and shows at once; the panels need
# torch and take their tabs (TABS) once it has loaded.
STRIP_KEPT = 500  # images of the strip opened again at the next start (a folder of thousands is the Folder tab's)
# File → Open folder puts at most this many of the folder's images in the strip (each held decoded, with its
# preview); the Folder tab shows all of them, and a row picked there is the image every tab shows
STRIP_FROM_FOLDER = 500


def panel_classes() -> dict:
    """The panel class of each tab. Importing them imports torch and timm (~4 s here): app.py does it on a worker
    while the window frame is already on screen, then `MainWindow.attach_panels` builds them."""
    from .explore.attention_panel import AttentionPanel
    from .explore.compare_panel import ComparePanel
    from .explore.embeddings_panel import EmbeddingsPanel
    from .explore.internals_panel import InternalsPanel
    from .explore.play_panel import PlayPanel
    from .explore.predictions_panel import PredictionsPanel
    from .folder.folder_panel import FolderPanel
    from .teach.teach_panel import TeachPanel
    from .training.training_panel import TrainingPanel

    return dict(predictions=PredictionsPanel, attention=AttentionPanel, embeddings=EmbeddingsPanel,
                internals=InternalsPanel, compare=ComparePanel, folder=FolderPanel, training=TrainingPanel,
                play=PlayPanel, teach=TeachPanel)


class MainWindow(QMainWindow):
    def __init__(self, app: App | None = None, panels: bool = True) -> None:
        """Draws `app` (an App on the window's pools, made here when not given; its loads start here once the
        panels exist). `panels` False: the frame only (Qt, no torch), usable at once: images open into the strip, a
        Load or an Open folder waits; `attach_panels()` adds the panels once torch has loaded (app.py)."""
        super().__init__()
        configure_pyqtgraph()
        install_wheel_guard()  # app-wide, once: however the window is made (app.main, tests, benchmarks)
        workers.collect_garbage_on_gui_thread()  # Qt objects must never be destroyed by a worker's collection
        self.setWindowTitle("ViT Studio")
        self.setAcceptDrops(True)
        self.relay = Relay()
        self.app = app or App(workers.QT_RUNNER, follow_loads=False)
        self.state = self.app.state
        self.strip_paths = StripPaths(self.state)  # what is in the strip: an open adds only the rest
        self.settings = app_settings()  # in the data folder: one per data folder, not one per user (app_settings.py)
        # The model bar's jobs, keyed by the app's view state: a new Load request discards a load still running;
        # predictions are delivered only while the model they were made by is the loaded one.
        self.jobs = workers.ViewJobs(self.state.view, {"classify": ()})
        self.loader = self.app.loader
        self.loader.download = self.relay.download.emit  # a hub download's progress, to the model bar
        self._explore_path: str | None = None
        self._explore_after_load: tuple[str, str] | None = None  # (image, run) waiting for the run's model
        self.close_guard: CloseGuard | None = None  # asks before closing over a training run (with the panels)
        self.panels_ready = False
        self._after_panels: list = []  # what was asked before the panels existed (an Open folder), done then
        self._waiting_load = None  # the latest Load asked for before the panels existed
        for attr, _title in TABS:
            setattr(self, attr, None)
        self.model_panel = ModelPanel(self.state, catalog=False)  # listing the catalog imports timm: later
        self.strip = ImageStripWidget(self.state)
        self._build_central()
        self._build_docks()
        self.recent_menu = build_menus(self)
        self._connect()
        restore_window(self, self.settings)  # device, precision, geometry (fitted to the screen)
        restore_folder_work(self.app.folder_work, self.settings)  # this machine, or a Ray cluster
        self._status_timer = QTimer(self, interval=250, timeout=self._refresh_status)
        self._status_timer.start()
        self._on_message("info", "Drop images or folders on the window. Models marked ● have weights "
                                 "available offline; others need a network once, or a file in models/.")
        if panels:
            self.attach_panels()

    def attach_panels(self) -> None:
        """The panels in their tabs, and what waited for torch: every device this machine has (with the one saved
        last time), the model catalog, the Edit menu, the session memory, then a Load or an Open folder asked for
        meanwhile. Runs on the GUI thread once the panel modules are imported."""
        classes = panel_classes()
        self.state.offer_devices()  # the model bar's device combo follows the field's choices
        saved = self.settings.value("device", "auto")  # a GPU the frame could not offer yet, unless one was picked
        if self.state.view.device == "auto" and saved in self.state.view.fields()["device"].choices:
            self.state.view.update(device=saved)
        self.model_panel.fill_catalog()
        names = self.model_panel.catalog_names()
        for index, (attr, _title) in enumerate(TABS):
            kind = classes[attr]
            panel = kind(self.app, names) if attr in ("compare", "training") else kind(self.app)
            setattr(self, attr, panel)
            self.tabs.set_page(index, panel)
        marks = self.model_panel.catalog_marks()
        mark_like_the_model_bar(self.training.dataset.base_model, marks)
        mark_like_the_model_bar(self.compare.other_name, marks)
        self.routes = PanelRoutes(self)  # what one tab hands to another
        self.close_guard = CloseGuard(self, self.training)
        fill_edit_menu(self)  # Edit → Undo / Redo of the Folder tab's sorts, moves and exclusions
        self.memory = WindowMemory(self)  # the Training form, its dataset, the Folder tab's folder and filters
        self.panels_ready = True
        if self._waiting_load is not None:
            self._load_requested(self._waiting_load)
        waiting, self._after_panels = self._after_panels, []
        for step in waiting:
            step()

    def _build_central(self) -> None:
        """Model bar on top; the image strip beside the tabs (each a placeholder until the panels are attached)."""
        self.tabs = ScrollingTabWidget()  # each page scrolls below its minimum: the window fits 1280×720
        self.tabs.setObjectName("tabs")
        for _attr, title in TABS:
            waiting = QLabel("Loading PyTorch and timm…")
            waiting.setAlignment(Qt.AlignCenter)
            self.tabs.addTab(waiting, title)
        splitter = QSplitter(Qt.Horizontal)
        splitter.addWidget(self.strip)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([150, 1130])  # the strip as wide as its thumbnails; the tabs take the rest
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.model_panel)
        layout.addWidget(splitter, 1)
        self.setCentralWidget(central)

    def _build_docks(self) -> None:
        """Model card on the right, log at the bottom, jobs in the status bar."""
        self.card_view = ModelCardView()
        card_dock = QDockWidget("Model card", self)
        card_dock.setObjectName("model_card_dock")
        card_dock.setWidget(scrolling(self.card_view))  # long values wrap or scroll, never widen the window
        card_dock.setMinimumWidth(200)
        self.card_view.form.setRowWrapPolicy(QFormLayout.WrapAllRows)  # each value under its name: full width
        self.addDockWidget(Qt.RightDockWidgetArea, card_dock)
        self.log_view = QPlainTextEdit(readOnly=True)
        self.log_view.setMaximumBlockCount(2000)
        log_dock = QDockWidget("Log", self)
        log_dock.setObjectName("log_dock")
        log_dock.setWidget(self.log_view)
        self.addDockWidget(Qt.BottomDockWidgetArea, log_dock)
        self.resizeDocks([log_dock], [110], Qt.Vertical)
        self.resizeDocks([card_dock], [270], Qt.Horizontal)  # at 1280 wide the tabs keep ~850 px
        self.status_jobs = QLabel()
        self.statusBar().addPermanentWidget(self.status_jobs)
        self.error_indicator = ErrorIndicatorWidget(self)  # errors wait there; nothing pops up by itself
        self.statusBar().addPermanentWidget(self.error_indicator)
        self.notice = StatusNoticeWidget.into(self.statusBar())  # a crash or an export: in sight until dismissed
        self.passing = PassingMessages(self.statusBar(), [self.status_jobs, self.error_indicator])

    def _connect(self) -> None:
        self.state.view.events.requested.connect(self._load_requested)
        self.relay.download.connect(self.model_panel.set_download_progress)
        self.state.model_loaded.connect(self._on_model_loaded)
        self.state.images_added.connect(self._on_images_added)
        self.state.message.connect(self._on_message)
        self.state.message_updated.connect(self._on_message_updated)
        self.state.error.connect(self._on_error)

    # ----- menus, drag and drop -------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls() or event.mimeData().hasImage():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        mime = event.mimeData()
        paths = [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]
        if paths:
            self.add_paths(paths)
        elif mime.hasImage():
            self._add_qimage(mime.imageData(), "dropped image")
        event.acceptProposedAction()

    def _add_qimage(self, qimage, name: str) -> None:
        from PIL import Image
        from PySide6.QtGui import QImage

        qimage = qimage.convertToFormat(QImage.Format_RGB888)
        w, h, stride = qimage.width(), qimage.height(), qimage.bytesPerLine()
        image = Image.frombuffer("RGB", (w, h), bytes(qimage.constBits()), "raw", "RGB", stride, 1)
        self.state.add_images([make_entry(f"{name} {time.strftime('%H:%M:%S')}", to_rgb(image))])

    # ----- jobs -----------------------------------------------------------------------------------
    def add_paths(self, paths: list[str], limit: int | None = None) -> None:
        """Read files and folders in the background; new images (or their errors) appear as they are read, in
        batches. Images already in the strip are not added again; at most `limit` are added; Open recent remembers
        the open once something in it opened."""
        paths = [str(p) for p in paths]
        many = len(paths) > 8 or any(Path(p).is_dir() for p in paths)  # a folder scan must not hold a slider
        opening = Opening(self, paths)
        workers.start_job("Reading images", functools.partial(read_new_images, paths=paths,
                                                              known=self.strip_paths.snapshot(), limit=limit),
                          on_yield=opening.add, on_result=opening.done, on_error=self._on_job_error,
                          kind=workers.LONG if many else workers.INTERACTIVE)

    def open_folder(self, folder: str) -> None:
        """File → Open folder: its images in the strip and the folder in the Folder tab (one Open folder; the tab
        opens it once it exists); the strip takes the folder's first STRIP_FROM_FOLDER images."""
        self.add_paths([folder], limit=STRIP_FROM_FOLDER)
        if self.panels_ready:
            self.folder.open_folder(folder)
        else:
            self._after_panels.append(functools.partial(self.open_folder_tab, folder))

    def open_folder_tab(self, folder: str) -> None:
        self.folder.open_folder(folder)

    def explain_file(self, path: str) -> None:
        """An image from the folder view, shown in the attention explorer (read, added to the strip, selected)."""
        known = next((e for e in self.state.images if e.path == path), None) if path in self.strip_paths else None
        if known is not None:
            self._show_in_attention(known)
            return

        def read(cancel):
            try:
                return make_entry(path, read_image(path))
            except ImageReadError as exc:
                return make_entry(path, error=exc.reason)

        workers.start_job("Reading image", read, on_result=self._show_in_attention, on_error=self._on_job_error)

    def _show_in_attention(self, entry) -> None:
        if entry not in self.state.images:
            self._add_entries([entry])
        if entry.error is None:
            self.state.select(entry)
            self.show_tab("attention")

    def _add_entries(self, entries: list) -> list:
        """The entries not in the strip yet, added in one event (two opens of the same files racing: the first
        one wins); returns them."""
        new, seen = [], set()
        for entry in entries:
            if entry.path not in self.strip_paths and entry.path not in seen:
                new.append(entry)
                seen.add(entry.path)
        if new:
            self.state.add_images(new)
        return new

    def request_model(self, spec: str, device: str | None = None, precision: str | None = None,
                      weights: str | None = None) -> None:
        """Load `spec` on the model bar's device and precision (or those given); the latest request wins."""
        self.state.request_model(spec, device, precision, weights)

    def _load_requested(self, request) -> None:
        """The one place a model load starts: a new request in the app's view state (the model bar's Load, the
        command line, the session memory, a finished training run); before the panels exist, the latest one waits
        for them (they show what the model loaded is)."""
        if not self.panels_ready:
            self._waiting_load = request
            self._on_message("info", f"{request.spec} loads once PyTorch has loaded.")
            return
        self._waiting_load = None
        self._on_message("info", f"Loading {request.spec} on {request.device} ({request.precision})…")
        if not self.loader.follows:  # an App a script built loads by itself
            self.loader.load(request)

    def _on_model_loaded(self, loaded) -> None:
        self.settings.setValue("model", loaded.name)
        self.settings.setValue("device", self.state.view.device)
        # the choice, not what it resolved to here: 'auto' stays auto (bf16 on this GPU, fp32 on the next laptop)
        self.settings.setValue("precision", self.state.view.precision)
        from vitstudio.app.model_facts import model_card

        self.card_view.show_card(model_card(loaded))
        if loaded.label_set.startswith("zero-shot"):  # the same model given classes in words, not a new load
            self._on_message("info", f"{loaded.display_name} now classifies into {', '.join(loaded.labels)} "
                                     f"({loaded.label_set}).")
        else:
            self._on_message("info", f"Loaded {loaded.display_name} ({loaded.weights_source}) on {loaded.device}.")
            for note in loaded.notes:  # a run that did not finish: said where the user is looking (status bar)
                self._on_message("warning", note)
        self.setWindowTitle(f"ViT Studio — {loaded.display_name}")  # which model every view is showing
        self._classify_pending()
        pending, self._explore_after_load = self._explore_after_load, None
        if pending is not None and is_model_of(loaded, pending[1]):
            self.explore_image(*pending)

    def _on_images_added(self, entries) -> None:
        for entry in entries:
            if entry.path == self._explore_path:
                self._explore_path = None
                self.state.select(entry)
                self.show_tab("attention")
        self._classify_pending()

    def explore_image(self, path: str, run: str = "") -> None:
        """Open `path` (e.g. a misclassified training image) in the attention explorer; with `run`, explained by
        that run's model (loaded first when another one is)."""
        if run and not is_model_of(self.state.model, run):
            self._explore_after_load = (path, run)
            self._on_message("info", f"Loading the model of run {Path(run).name} to explain {Path(path).name}…")
            self.request_model(run)
            return
        known = next((e for e in self.state.images if e.path == path), None)
        if known is not None:
            self.state.select(known)
            self.show_tab("attention")
        else:
            self._explore_path = path
            self.add_paths([path])

    def _classify_pending(self) -> None:
        loaded = self.state.model
        if loaded is None or not loaded.labels:  # a headless model predicts nothing (Predictions says why)
            return
        todo = [e for e in self.state.images if e.image is not None and self.state.prediction_for(e) is None]
        if not todo:
            return
        if self.state.selected in todo:  # the image on screen first
            todo.remove(self.state.selected)
            todo.insert(0, self.state.selected)
        self.jobs.start("classify", "Classifying", classify_job, loaded, todo, on_yield=self._deliver_predictions,
                        on_result=self._classified, on_error=self._on_job_error)

    def _deliver_predictions(self, pairs) -> None:
        self.state.set_predictions(self.state.model, pairs)

    def _classified(self, _none) -> None:
        self.jobs.clear("classify")

    # ----- messages, status, shutdown ---------------------------------------------------------------
    def _on_job_error(self, exc: BaseException) -> None:
        self.state.report(exc)

    def _on_error(self, notice) -> None:
        """Every error: logged with its details, in the status bar, and counted by the status bar's error button,
        whose click opens it in a box that does not block the window (its "Show Details…" holds the traceback)."""
        log.error("%s", notice.logged)
        self.log_view.appendPlainText(f"[{time.strftime('%H:%M:%S')}] error: {notice.message}")
        self.error_indicator.add(notice)  # first: the message is elided to the room the button leaves
        self.passing.show(notice.message)

    def show_warning(self, message: str) -> None:
        """Logged, in the status bar and in a box that does not block the window."""
        self._on_message("warning", message)
        self._non_modal_box(message)

    def show_notice(self, text: str, path: str | None = None, link: str = "Show folder",
                    action: str | None = None) -> None:
        """Logged, and kept in the status bar with a link to `path` (or that emits `action`) until dismissed."""
        self._on_message("info", text)
        self.statusBar().clearMessage()  # the notice says it, with its link: not both drawn over each other
        self.notice.show_notice(text, path, link, action)

    def _non_modal_box(self, message: str, details: str = "") -> None:
        box = QMessageBox(QMessageBox.Warning, "ViT Studio", message, QMessageBox.Ok, self)
        if details:
            box.setDetailedText(details)
        box.setModal(False)
        box.setAttribute(Qt.WA_DeleteOnClose)
        box.show()

    def _on_message_updated(self, earlier: str, text: str) -> None:
        """A message's newer figures replace it in the status bar while it is still there (the log keeps the first)."""
        if self.passing.text != earlier or not self.statusBar().currentMessage():
            return
        if text:
            self.passing.show(text)
        else:
            self.statusBar().clearMessage()

    def _on_message(self, level: str, text: str) -> None:
        getattr(log, level if level != "warning" else "warning")(text)
        self.log_view.appendPlainText(f"[{time.strftime('%H:%M:%S')}] {level}: {text}")
        self.passing.show(text)

    def show_tab(self, name: str) -> None:
        for i in range(self.tabs.count()):
            if name.lower() in self.tabs.tabText(i).lower():
                self.tabs.setCurrentIndex(i)
                return
        self._on_message("warning", f"No tab called '{name}'.")

    def remember_recent(self, paths: list[str], opened: bool = True) -> None:
        """One Open recent entry for this open, first; an open that showed nothing is taken out instead."""
        recent = updated_recent(list_value(self.settings, "recent"), recent_entry(paths), opened)
        self.settings.setValue("recent", recent)
        self.recent_menu.refresh()

    def _refresh_status(self) -> None:
        model = self.state.model
        device = f"{model.device} · {model.precision}" if model else "no model"
        running = ", ".join(sorted({h.name + (" (paused)" if h.cancel_token.paused else "")  # a paused run too
                                    for h in workers.running_jobs()})) or "idle"
        if self.panels_ready:
            from vitstudio.app.model_facts import memory_in_use  # torch's (GPU memory)

            memory = memory_in_use(model.device if model else None)
        else:
            memory = "loading PyTorch and timm…"
        self.status_jobs.setText(f"{device} · {memory} · {counted(len(self.state.images), 'image')} · {running}")
        self.passing.refit()  # the message beside it, elided to the room the label leaves now

    def closeEvent(self, event) -> None:
        if self.close_guard is not None and not self.close_guard.allows_close():
            event.ignore()  # staying, or closing when the run has finished
            return
        save_window(self, self.settings)  # geometry and docks, unless a --screenshot run's
        self.settings.setValue("strip", [e.path for e in self.state.images if e.error is None][:STRIP_KEPT])
        self._status_timer.stop()
        if not workers.shutdown(timeout_ms=10000):
            log.warning("some jobs did not stop within 10 s")
        super().closeEvent(event)
