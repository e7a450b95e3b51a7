"""Attention over training: the probe image's rollout after each epoch, a slider across epochs, and export of the
whole history as an animated GIF or MP4."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton, QSlider, QVBoxLayout, QWidget

from vitstudio.app.evented import Field, ViewState
from vitstudio.app.training_jobs import animation_job
from vitstudio.core.fields import Range
from vitstudio.gui import file_dialogs

from .. import workers
from ..common.bind import bind
from ..common.map_view import MapView


class ProbeHistoryView(QWidget):
    def __init__(self, state, parent: QWidget | None = None) -> None:
        """What the animation export has to say goes to the app's messages; its errors to `state.report`."""
        super().__init__(parent)
        self.report, self.report_error = state.message.emit, state.report
        self.snapshots: list = []  # shown, not owned: the panel's buffers
        self.run: Path | None = None
        self.view = MapView()
        self.slider = QSlider(Qt.Horizontal)
        self.epoch_state = ViewState(shown=Field(0, int, range=Range(0, 0)))  # the snapshot on screen
        bind(self.slider, self.epoch_state, "shown")
        self.epoch_state.events.shown.connect(self._show)
        self.label = QLabel("After each epoch, the probe image's attention rollout is snapshotted here.")
        self.label.setWordWrap(True)
        self.animation_button = QPushButton("Export as animation (GIF / MP4)…")
        self.animation_button.setEnabled(False)
        self.animation_button.clicked.connect(lambda: self.export_animation())
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.slider)
        layout.addWidget(self.animation_button)

    def show_snapshots(self, snapshots: list, run: Path | None) -> None:
        """Show the last of `snapshots` (a run's, possibly still growing) and let the slider reach them all."""
        self.snapshots, self.run = snapshots, run
        self.animation_button.setEnabled(bool(snapshots) and run is not None)
        if not snapshots:
            self.view.set_image(None)
            self.label.setText("No attention snapshots for this run.")
            return
        last = len(snapshots) - 1
        with self.epoch_state.batch():
            self.epoch_state.redeclare("shown", range=Range(0, last))
            self.epoch_state.update(shown=last)
        self._show(last)  # the same index may now be another run's snapshot

    def _show(self, index: int) -> None:
        if not 0 <= index < len(self.snapshots):
            return
        snap = self.snapshots[index]
        self.view.set_image(snap.crop)
        self.view.set_map(snap.rollout, "inferno", 0.6)
        self.label.setText(f"Attention rollout of the probe image after epoch {snap.epoch + 1} "
                           f"(slide to compare epochs).")

    def export_animation(self, path: str | None = None) -> None:
        run = self.run
        if run is None:
            return
        if path is None:
            path = file_dialogs.save_file(self, "Export attention over training", f"{run.name}-attention.gif",
                                          "Animated GIF (*.gif);;MP4 video (*.mp4)")
        if path:
            workers.start_job("Writing animation", lambda cancel: animation_job(cancel, run, Path(path)),
                              on_result=lambda out: self.report("info", f"Saved {out}"),
                              on_error=lambda exc: self.report_error(exc, "Writing animation"))
