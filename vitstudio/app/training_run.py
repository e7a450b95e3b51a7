"""A training run in the background, Qt-free: started from a TrainConfig (or resumed), paused, cancelled (the run
keeps its last finished epoch and returns its report), its records delivered as they come. One run at a time; the
Training tab draws it, a script drives it the same way."""

from __future__ import annotations

from .evented import Event, EventedModel
from .jobs import LONG, Call, JobHandle, Runner, check_module_level


def train_job(cancel, config, resume: bool):
    from vitstudio.core.train.engine import fine_tune

    return (yield from fine_tune(config, cancel, resume=resume))


def torchrun_job(cancel, config, gpus):
    from vitstudio.core.train.launcher import run_torchrun

    return (yield from run_torchrun(config, gpus, cancel))


class TrainingRun(EventedModel):
    record = Event("an engine record: StepProgress, EpochMetrics, RunWarning, …")
    finished = Event("the run's report (cancelled runs too)")
    failed = Event("the exception")

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.job: JobHandle | None = None

    @property
    def running(self) -> bool:
        return self.job is not None and not self.job.done

    def start(self, config, resume: bool = False, gpus=None) -> JobHandle:
        """Run `config` (on `gpus` with torchrun when given, a new run only)."""
        fn, inputs = (torchrun_job, (config, gpus)) if gpus and not resume else (train_job, (config, resume))
        check_module_level(fn)
        self.job = JobHandle("Training", LONG, on_result=self.finished.emit, on_yield=self.record.emit,
                             on_error=self.failed.emit)
        self.runner.submit(self.job, Call(fn, inputs))
        return self.job

    def cancel(self) -> None:
        """Stop after the current step; the report still comes (`finished`)."""
        if self.job is not None:
            self.job.cancel()

    def pause(self, paused: bool) -> None:
        if self.job is not None:
            (self.job.cancel_token.pause if paused else self.job.cancel_token.resume)()
