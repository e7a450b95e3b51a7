"""The Play tab: a camera or a video file through the loaded model, live. Frames are read on a worker that keeps
only the newest one (a slow model skips frames, never queues them); each analysed frame comes back annotated (the
prediction and, if chosen, a registered attention map over what the model saw) with frames per second and latency,
and can be recorded to a video file. At most one analysed frame waits for the window: the job analyses the next
frame (on a thread of its own) while it draws the annotated picture of this one and the window shows the last, and
hands it over once that one is shown, so nothing piles up; the window draws only the newest frame it was handed.
`tests/benchmarks/play.py --window` measures the tab beside `vitstudio play` on one file."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.analyses import play_methods, why_not
from vitstudio.app.model_facts import why_no_predictions
from vitstudio.app.play_jobs import is_source_error, play_job
from vitstudio.gui import file_dialogs

from .. import workers
from ..common.bind import bind
from ..common.method_combo import method_combo
from ..imaging import pil_to_pixmap

VIDEO_FILES = "Videos (*.mp4 *.avi *.mov *.mkv *.webm *.m4v);;All files (*)"
RECORD_HELP = ("Write the next session's annotated frames to a video file (.mp4 or .avi) at the source's frame rate, "
               "each analysed frame held over the frames skipped after it")


class PlayPanel(QWidget):
    def __init__(self, app, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state = app.state
        self.view_state = app.play_state
        self.jobs = workers.ViewJobs(self.view_state, {"play": ("source", "method", "record")}, long=("play",))
        self._shown = threading.Event()
        self._latest = None  # (picture, FrameResult, frames/s) handed over and not drawn yet
        self._draw_timer = QTimer(self, singleShot=True, interval=0)
        self._draw_timer.timeout.connect(self._show_latest)
        self._build()
        state.model_loaded.connect(self._on_model)

    def _build(self) -> None:
        self.camera = QComboBox()
        for i in range(4):
            self.camera.addItem(f"Camera {i}", f"camera:{i}")
        self.camera_button = QPushButton("Start camera")
        self.file_button = QPushButton("Open video…")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.method = QComboBox()
        self.method.addItem("Prediction only", None)
        titled = method_combo(play_methods())
        for i in range(titled.count()):
            self.method.addItem(titled.itemText(i), titled.itemData(i))
            self.method.setItemData(i + 1, titled.itemData(i, Qt.ToolTipRole), Qt.ToolTipRole)
        self._help = [self.method.itemData(i, Qt.ToolTipRole) or "" for i in range(self.method.count())]
        self.record_button = QPushButton("Record to…")
        self.record_button.setCheckable(True)
        self.record_button.setToolTip(RECORD_HELP)
        self.screen = QLabel("Play a camera or a video file through the model: its prediction and, if chosen, "
                             "where it looks, live.")
        self.screen.setAlignment(Qt.AlignCenter)
        self.screen.setWordWrap(True)
        self.screen.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Ignored)
        self.screen.setMinimumSize(320, 240)
        self.stats = QLabel("")
        top = QHBoxLayout()
        for w in (self.camera, self.camera_button, self.file_button, QLabel("Map"), self.method, self.record_button,
                  self.stop_button):
            top.addWidget(w)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.screen, 1)
        layout.addWidget(self.stats)
        self.camera_button.clicked.connect(lambda: self.play(self.camera.currentData()))
        self.file_button.clicked.connect(self._choose_file)
        self.stop_button.clicked.connect(self.stop)
        bind(self.method, self.view_state, "method")
        self.view_state.events.method.connect(self._restart)
        self.view_state.events.record.connect(self._show_record)
        self.record_button.toggled.connect(self._on_record)

    # -- what to play ----------------------------------------------------------------------------------
    def _choose_file(self) -> None:
        path = file_dialogs.open_file(self, "Open a video", VIDEO_FILES)
        if path:
            self.play(path)

    def _on_record(self, on: bool) -> None:
        if on == (self.view_state.record is not None):  # the button following the state
            return
        if on:
            path = file_dialogs.save_file(self, "Record the annotated stream", "play.mp4",
                                          "MP4 video (*.mp4);;AVI video (*.avi)")
            if not path:
                self.record_button.setChecked(False)
                return
            self.view_state.record = path
        else:
            self.view_state.record = None
        if self.stop_button.isEnabled():  # playing: go on, recording or not
            self._start()

    def _show_record(self, record: str | None) -> None:
        self.record_button.setChecked(record is not None)
        self.record_button.setToolTip(f"Recording to {record}" if record else RECORD_HELP)

    def _disarm(self) -> str:
        """A recording is one session's: the next one never writes over it unasked. Says where it went."""
        record, self.view_state.record = self.view_state.record, None
        return f"; recorded to {record}" if record else ""

    def _on_model(self, model) -> None:
        # "Prediction only" needs classes: a headless model plays with a map (DINO's attention videos)
        headless = why_no_predictions(model)
        reasons = [headless] + [why_not(model.model, self.method.itemData(i)) for i in range(1, self.method.count())]
        for i, reason in enumerate(reasons):  # the maps this model has; the reason as tooltip otherwise
            self.method.model().item(i).setEnabled(reason is None)
            self.method.setItemData(i, reason or self._help[i], Qt.ToolTipRole)
        if reasons[self.method.currentIndex()] is not None:
            self.method.setCurrentIndex(next((i for i, r in enumerate(reasons) if r is None), 0))
        self.view_state.model = model.uid  # discards a session of the previous model …
        self._restart()  # … and carries on with this one

    # -- the session -----------------------------------------------------------------------------------
    def play(self, source: str) -> None:
        """Start playing `source` (a video file or camera:N) with the loaded model."""
        if self.state.model is None:
            self.state.message.emit("warning", "Load a model first.")
            return
        self.view_state.source = source
        self._start()

    def _restart(self, *_changed) -> None:
        """Another map or model while playing: a new session; a recording ends with the last one, kept."""
        if self.stop_button.isEnabled():
            if self.view_state.record is not None:
                self.stats.setText(f"Recording stopped{self._disarm()}.")
            self._start()

    def _start(self) -> None:
        vs = self.view_state
        if vs.source is None or self.state.model is None:
            return
        self._shown.set()  # a session still winding down stops waiting for the screen
        self._shown, self._latest = threading.Event(), None
        self.screen.setText(f"Opening {vs.source}…")
        self.stats.setText("")
        self.stop_button.setEnabled(True)
        self.jobs.start("play", "Playing", play_job, self.state.model, vs.source, vs.method, vs.record, self._shown,
                        on_yield=self._on_frame, on_result=self._on_finished, on_error=self._on_error)

    def stop(self) -> None:
        self.jobs.discard("play")
        self._shown.set()
        self._latest = None
        self.stop_button.setEnabled(False)
        saved = self._disarm()
        self.stats.setText((self.stats.text() + " · stopped" if self.stats.text() else "Stopped") + saved)

    def _on_frame(self, value) -> None:
        """Only the newest frame is drawn: frames handed over while the window was busy are passed over."""
        self._latest = value
        self._draw_timer.start()  # after the events already waiting: any newer frame among them replaces this one

    def _show_latest(self) -> None:
        value, self._latest = self._latest, None
        if value is not None:
            self._show(value)

    def _show(self, value) -> None:
        picture, result, fps = value
        pixmap = pil_to_pixmap(picture)
        size = self.screen.size()
        self.screen.setPixmap(pixmap.scaled(size, Qt.KeepAspectRatio, Qt.SmoothTransformation))
        speed = f"{fps:.1f} frames/s · " if fps else ""
        self.stats.setText(f"{speed}latency {result.latency_ms:.0f} ms · frame {result.index} · {result.top1}")
        self._shown.set()

    def _on_finished(self, summary) -> None:
        self._show_latest()  # the last frame, then what the session did
        analysed, read, recording = summary
        self.jobs.clear("play")
        self.stop_button.setEnabled(False)
        self._disarm()
        saved = "" if recording is None else (
            f"; recorded to {recording.path}: {recording.writer.frames} frames at the source's {recording.fps:g} "
            f"frames/s" + (f", each analysed frame held over the {recording.held} skipped after it"
                          if recording.held else ""))
        skipped = " (the others arrived while the model was busy)" if analysed < read else ""
        self.stats.setText(f"Finished: {analysed} of {read} frames analysed{skipped}{saved}.")

    def _on_error(self, exc: BaseException) -> None:
        self._latest = None
        self.stop_button.setEnabled(False)
        self._disarm()
        if is_source_error(exc):  # no camera, not a video: said here, where the user looks
            self.screen.setText(str(exc))
            return
        self.state.report(exc, "Play")
