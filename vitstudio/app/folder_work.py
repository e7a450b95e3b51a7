"""Where the Folder tab's model passes run, Qt-free: on this machine, or on a Ray cluster (`--ray` on the command
line; core/folder/ray_jobs.py). The setting is the App's; the Folder model's embedding pass reads it when it starts,
so the same folder opened on a cluster lands in the same cache and shows the same results, with the same progress
and Cancel. "Test connection" joins the cluster and says how many nodes, CPUs and GPUs it sees, or why it cannot."""

from __future__ import annotations

from .evented import Event, EventedModel, Field, ViewState
from .jobs import KeyedJobs, Runner
from .notices import describe

WHERE = ("here", "cluster")


class FolderWorkState(ViewState):
    CONTEXT = ()  # not keyed by a model or an image
    where: str = Field("here", choices=WHERE, labels=("this machine", "a Ray cluster"))
    address: str | None = Field(None, help="HOST:PORT as `ray start --head` prints it; empty: RAY_ADDRESS, else a "
                                           "local Ray instance")


def connect_job(cancel, address: str | None) -> str:
    from vitstudio.core.folder.ray_cluster import connect

    return connect(address).describe()


class FolderWork(EventedModel):
    said = Event("one line: what Test connection found, or why the cluster cannot be reached")

    def __init__(self, runner: Runner) -> None:
        self.state = FolderWorkState()
        self.jobs = KeyedJobs(self.state, {"test": ("where", "address")}, runner, long=("test",))
        self.line = ""

    def cluster(self) -> str | None:
        """None: this machine; else the address the folder passes run at ("" = RAY_ADDRESS or a local instance)."""
        return None if self.state.where == "here" else (self.state.address or "")

    def test(self) -> None:
        """Join the cluster the setting names and say what it holds (a long job: a local instance takes seconds)."""
        self._say("Connecting to the Ray cluster…")
        self.jobs.start("test", "Ray connection", connect_job, self.state.address or None,
                        on_result=lambda seen: self._say(f"Connected: {seen}."),
                        on_error=lambda exc: self._say(f"Cannot run folder work there: {describe(exc)}"))

    def _say(self, line: str) -> None:
        self.line = line
        self.said.emit(line)
