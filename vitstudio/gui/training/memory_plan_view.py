"""The Training form's memory plan: what the run's settings will take on their device (weights, gradients,
optimizer state, activations), whether it fits the device's free memory, and what would when it does not; planned
in a worker a moment after the settings stop changing (core/train/run_plan.py), keyed by the settings it read."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget
from shiboken6 import isValid

from vitstudio.app.evented import Field, ViewState
from vitstudio.app.training_jobs import plan_job, size_text

from .. import workers

# what the plan reads of a TrainConfig: a change of anything else (the lr, the epochs) plans nothing again
PLANNED = ("data_dir", "model", "weights", "scope", "last_blocks", "batch_size", "img_size", "precision", "device",
           "grad_checkpointing", "lora_r", "lora_targets", "opt", "data_path", "cache_memory_gb", "exclude",
           "val_ratio")
SHORT = {"gradients": "grads", "optimizer state": "optimizer", "working memory": "working", "decoded images": "images"}
WAIT_MS = 700  # after the last change: typing a batch size plans once


class MemoryPlanView(QWidget):
    settled = Signal()  # a plan or its failure arrived: whether Start can run may have changed

    def __init__(self, build_config: Callable, parent: QWidget | None = None) -> None:
        """`build_config()`: the TrainConfig Start would run (a ValueError while a setting is typed wrongly)."""
        super().__init__(parent)
        self.build_config = build_config
        self.view_state = ViewState(settings=Field(None, tuple, nullable=True))
        self.jobs = workers.ViewJobs(self.view_state, {"plan": ("settings",)}, without_context=("plan",))
        self.summary = QLabel("Memory plan: choose a dataset and a base model.")
        self.summary.setWordWrap(True)
        self.table = QLabel()  # the parts of the peak on one wrapped line: the column is pinned on a 720 px screen
        self.table.setWordWrap(True)
        small = self.table.font()
        small.setPointSizeF(small.pointSizeF() * 0.9)
        self.table.setFont(small)
        self.table.setTextInteractionFlags(Qt.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.table)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(WAIT_MS)
        self.timer.timeout.connect(self.plan_now)

    def request(self, *_changed) -> None:
        """Plan again once the settings have not changed for a moment."""
        self.timer.start()

    def plan_now(self) -> None:
        try:
            config = self.build_config()
        except (ValueError, AttributeError):  # a setting typed wrongly, or no dataset scanned yet
            self.view_state.update(settings=None)
            self.summary.setText("Memory plan: waits for a dataset, a base model and valid settings.")
            self.table.clear()
            return
        settings = tuple((name, getattr(config, name)) for name in PLANNED)
        if settings == self.view_state.settings and (self.jobs.running("plan") or self.jobs.current("plan")):
            return
        self.view_state.update(settings=settings)
        self.summary.setText(f"Memory plan: planning {config.model}…")
        self.jobs.start("plan", "Memory plan", plan_job, config, on_result=self._show, on_error=self._failed)

    def problem(self) -> str:
        """Why the settings planned last cannot run: planning them failed on a setting (a ValueError, as an adapter
        target the model lacks, which the run refuses too); "" otherwise. An error of another kind (a model the
        planner cannot size) never stops a run, as in `refuse_what_cannot_fit`."""
        exc = self.jobs.failed("plan")
        return workers.describe(exc) if isinstance(exc, ValueError) else ""

    def _show(self, plan) -> None:  # a RunPlan
        if not isValid(self.summary):  # the window closed while it planned
            return
        total = size_text(plan.plan.total)
        if plan.limit is None:
            verdict = f"{total} at its peak ({plan.plan.device}'s free memory is not known)"
        elif plan.fits:
            verdict = f"{total} at its peak, {size_text(plan.limit)} {plan.limit_source}: fits"
        else:
            verdict = (f"<b>will not fit</b>: {total}, {plan.limit_source} {size_text(plan.limit)}. Would fit: "
                       + ("; ".join(what for what, _ in plan.suggestions) or "a smaller model or a larger device"))
        self.summary.setText(f"Memory plan: {verdict}.")
        self.table.setText(" · ".join(f"{SHORT.get(name, name)} {size_text(value)}"
                                      for name, value, _ in plan.plan.rows()))
        self.table.setToolTip("\n".join(line.strip() for line in plan.lines()))
        self.planned = plan
        self.settled.emit()

    def _failed(self, exc: BaseException) -> None:
        if not isValid(self.summary):
            return
        self.summary.setText(f"Memory plan: cannot plan this run. {workers.describe(exc)}")
        self.table.clear()
        self.settled.emit()
