"""The Training tab's run controls: augmentation preview, the multi-GPU switch, Start / Pause / Cancel / Resume,
progress, status, the run's warning, and "Use this model" / "Export model…". Only widgets and what they show: the
panel starts, pauses and cancels runs."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from vitstudio.core.jobs import Progress
from vitstudio.core.train.engine import StepProgress


class RunControlsWidget(QWidget):
    def __init__(self, gpus: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gpus = gpus
        self.multi_gpu = QCheckBox(f"Use all {gpus} GPUs (DDP through torchrun, in a subprocess)")
        self.multi_gpu.setVisible(gpus > 1)
        self.start_button, self.pause_button, self.cancel_button, self.resume_button = (
            QPushButton(t) for t in ("Start", "Pause", "Cancel", "Resume run"))
        self.resume_button.setToolTip("Continue the unfinished run selected in History (cancelled, interrupted or "
                                      "killed) from its last checkpoint")
        self.pause_button.setCheckable(True)
        self.progress = QProgressBar()
        self.status = QLabel("Idle.")
        self.status.setWordWrap(True)
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("color: #b35900;")
        self.warning.setVisible(False)
        self.preview_button = QPushButton("Preview augmentation")
        self.use_button = QPushButton("Use this model")
        self.export_button = QPushButton("Export model…")
        self.export_button.setToolTip("ONNX with labels and preprocessing, or upstream's vit_model.py format")
        self._lay_out()

    def _lay_out(self) -> None:
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.preview_button)
        column.addWidget(self.multi_gpu)
        buttons = QHBoxLayout()
        for b in (self.start_button, self.pause_button, self.cancel_button, self.resume_button):
            buttons.addWidget(b)
        column.addLayout(buttons)
        column.addWidget(self.progress)
        column.addWidget(self.status)
        column.addWidget(self.warning)
        use_row = QHBoxLayout()
        use_row.addWidget(self.use_button, 1)
        use_row.addWidget(self.export_button)
        column.addLayout(use_row)

    def refresh(self, running: bool, resumable: bool, usable: bool) -> None:
        """Start/Pause/Cancel follow the run in progress; Resume/Use/Export follow the run shown (`resumable`,
        `usable`: whether it can be resumed, used)."""
        self.start_button.setEnabled(not running)
        self.pause_button.setEnabled(running and not self.multi_gpu.isChecked())  # a subprocess cannot pause
        self.cancel_button.setEnabled(running)
        self.resume_button.setEnabled(not running and resumable)
        self.use_button.setEnabled(usable)
        self.export_button.setEnabled(self.use_button.isEnabled())
        if not running:
            self.pause_button.setChecked(False)

    def show_step(self, rec: StepProgress, run_name: str | None) -> None:
        """A training step's progress; `run_name` prefixes the status when that run is not the one shown."""
        self.progress.setRange(0, rec.steps)
        self.progress.setValue(rec.step)
        self.progress.setFormat(f"epoch {rec.epoch + 1}/{rec.epochs} · step %v/%m")
        where = "" if run_name is None else f"{run_name}: "
        self.status.setText(f"{where}loss {rec.loss:.4f} · lr {rec.lr:.2e} · {rec.img_per_s:.1f} img/s · "
                            f"ETA {duration(rec.eta_s)}")

    def show_progress(self, rec: Progress) -> None:
        """A message of the run's preparation, with a bar when it counts (e.g. decoding the images into the cache
        before the first epoch)."""
        self.status.setText(rec.message)
        if rec.total:
            self.progress.setRange(0, rec.total)
            self.progress.setValue(rec.done)
            self.progress.setFormat(f"{rec.message}: %v/%m")

    def show_warning(self, message: str) -> None:
        self.warning.setText(f"<b>Warning:</b> {message}")
        self.warning.setVisible(True)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"
