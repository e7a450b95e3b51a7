"""The Training tab's run controls: augmentation preview, the multi-GPU switch, Start / Pause / Cancel / Resume,
progress, status, the run's warning, and "Use this model" / "Export model…". Only widgets and what they show: the
panel starts, pauses and cancels runs."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from vitstudio.app.training_jobs import StepProgress
from vitstudio.core.jobs import Progress

FAILED = "<b>Training failed:</b> "


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
        self.warnings: list[tuple[str, str]] = []  # (kind, message) of the run in progress or last finished
        self.warnings_shown = True  # False while another run (History) is on screen: its warnings are not these
        self.said_blocker = ""  # the reason Start cannot run that the status line says, if it says one
        self.paused_label = QLabel("<b>Paused</b>: the run waits at the next step; press Continue to go on.")
        self.paused_label.setStyleSheet("background: #fff3cd; color: #7a5300; padding: 4px;")
        self.paused_label.setWordWrap(True)
        self.paused_label.setVisible(False)
        self.paused = False
        self.preview_button = QPushButton("Preview augmentation")
        self.use_button = QPushButton("Use this model")
        self.export_button = QPushButton("Export model…")
        self.export_button.setToolTip("ONNX with labels and preprocessing, or upstream's vit_model.py format")
        self._lay_out()

    def _lay_out(self) -> None:
        """The run's buttons sit at the foot of the column, under the lines whose height changes as a run starts
        and ends (status, warnings, Paused), so they never move; the four share the row equally, so Pause turning
        into Continue moves none of them either."""
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.preview_button)
        column.addWidget(self.multi_gpu)
        column.addWidget(self.paused_label)
        column.addWidget(self.progress)
        column.addWidget(self.status)
        column.addWidget(self.warning)
        buttons = QHBoxLayout()
        for b in (self.start_button, self.pause_button, self.cancel_button, self.resume_button):
            b.setSizePolicy(QSizePolicy.Ignored, b.sizePolicy().verticalPolicy())  # widths from the row, not text
            buttons.addWidget(b, 1)
        column.addLayout(buttons)
        use_row = QHBoxLayout()
        use_row.addWidget(self.use_button, 1)
        use_row.addWidget(self.export_button)
        column.addLayout(use_row)

    def refresh(self, running: bool, resumable: bool, usable: bool, start_blocker: str = "",
                preview_blocker: str = "") -> None:
        """Start/Pause/Cancel follow the run in progress; Resume/Use/Export follow the run shown (`resumable`,
        `usable`: whether it can be resumed, used). `start_blocker`, `preview_blocker`: why Start or Preview
        cannot run now ("" when they can), shown as the disabled button's tooltip."""
        self.start_button.setEnabled(not running and not start_blocker)
        self.start_button.setToolTip(start_blocker or "Start training with these settings")
        self.preview_button.setEnabled(not preview_blocker)
        self.preview_button.setToolTip(preview_blocker or "16 augmented views of training images, with these "
                                                          "settings")
        self.pause_button.setEnabled(running and not self.multi_gpu.isChecked())  # a subprocess cannot pause
        self.cancel_button.setEnabled(running)
        self.resume_button.setEnabled(not running and resumable)
        self.use_button.setEnabled(usable)
        self.export_button.setEnabled(self.use_button.isEnabled())
        if not running:
            self.pause_button.setChecked(False)
            self.show_paused(False)

    def say_readiness(self, blocker: str, always: bool = False) -> None:
        """The status line after a change of the settings: why Start cannot run, or that it can where the line
        said it could not or that the last start failed (`always`: in any case); another line (a finished run's
        summary) stays."""
        stale = self.status.text() == self.said_blocker or self.status.text().startswith(FAILED)
        if blocker or always or stale:
            self.status.setText(blocker or "Ready: press Start.")
        self.said_blocker = blocker

    def show_failed(self, message: str) -> None:
        self.status.setText(f"{FAILED}{message}")

    def show_paused(self, paused: bool) -> None:
        """Paused is a state of the run, said beside the buttons and on the bar, not only by the button's label."""
        self.paused = paused
        self.pause_button.setText("Continue" if paused else "Pause")  # "Resume run" is the History one
        self.paused_label.setVisible(paused)
        self.progress.setFormat(self._on_bar(self.progress.format().removeprefix("Paused · ")))
        if paused:  # no time left is counting down while nothing runs
            self.status.setText(self.status.text().split(" · ETA ", 1)[0])

    def _on_bar(self, text: str) -> str:
        return f"Paused · {text}" if self.paused else text

    def show_step(self, rec: StepProgress, run_name: str | None) -> None:
        """A training step's progress; `run_name` prefixes the status when that run is not the one shown."""
        self.progress.setRange(0, rec.steps * rec.epochs)  # the whole run (it filled up again every epoch)
        self.progress.setValue(rec.epoch * rec.steps + rec.step)
        self.progress.setFormat(self._on_bar(f"epoch {rec.epoch + 1}/{rec.epochs} · step {rec.step}/{rec.steps}"))
        where = "" if run_name is None else f"{run_name}: "
        eta = "" if self.paused else f" · ETA {duration(rec.eta_s)}"  # a step that ends after Pause: no ETA
        self.status.setText(f"{where}loss {rec.loss:.4f} · lr {rec.lr:.2e} · {rec.img_per_s:.1f} img/s{eta}")

    def show_progress(self, rec: Progress) -> None:
        """A message of the run's preparation, with a bar when it counts (e.g. decoding the images into the cache
        before the first epoch)."""
        self.status.setText(rec.message)
        if rec.total:
            self.progress.setRange(0, rec.total)
            self.progress.setValue(rec.done)
            self.progress.setFormat(f"{rec.message}: %v/%m")

    def show_warning(self, message: str, kind: str = "") -> None:
        """A warning of the run; one of a `kind` replaces the earlier one of that kind (a figure updated each
        epoch), and an empty message withdraws it (the run got past what it said)."""
        if kind:
            self.warnings = [(k, m) for k, m in self.warnings if k != kind]
        if message:
            self.warnings.append((kind, message))
        self._show_warnings()

    def show_no_run(self) -> None:
        """Nothing of a run on screen: no warning, an empty bar (another dataset was chosen)."""
        self.clear_warnings()
        self.progress.setRange(0, 1)
        self.progress.reset()
        self.progress.setFormat("")

    def clear_warnings(self, kind: str | None = None) -> None:
        """Forget the warnings of `kind` (all with None): the state they described is over."""
        self.warnings = [(k, m) for k, m in self.warnings if kind is not None and k != kind]
        self._show_warnings()

    def start_warnings(self) -> None:
        """A run starts here, on screen: none of the last run's warnings, and its own shown as they come."""
        self.warnings_shown = True
        self.clear_warnings()

    def show_warnings_of_shown_run(self, shown: bool) -> None:
        """The warnings are of the run trained here last; another run clicked in History hides them until that
        run is on screen again (they described it, not the one shown)."""
        self.warnings_shown = shown
        self._show_warnings()

    def shown_warnings(self) -> list[str]:
        return [m for _, m in self.warnings] if self.warnings_shown else []

    def _show_warnings(self) -> None:
        shown = self.shown_warnings()
        self.warning.setText("<br>".join(f"<b>Warning:</b> {m}" for m in shown))
        self.warning.setVisible(bool(shown))


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"
