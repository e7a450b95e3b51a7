"""Joining a Ray cluster for the folder passes (`--ray [ADDRESS]`, the App's "Run folder work on"): the address
resolved as `ray.init` resolves it, a local instance started where none is named, every failure one line. No torch
here: a command starts Ray before it imports its model's libraries (core/folder/ray_jobs.py runs the passes).

Ray starts a local instance's processes (its store, scheduler, workers) with PR_SET_PDEATHSIG set: the kernel kills
them when the *thread* that started them ends, not the process. `ray.init` therefore runs on one thread of this
module that lives as long as the process (`_Keeper`): started on a worker thread of the window's pool, the instance
died with that thread once the pool retired it (30 s idle), and the next job's Ray client gave up after 60 s and ended
the whole process.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from vitstudio.core.errors import UserFacingError

INSTALL = "pip install 'vitstudio[cluster]'"


class RayJobError(RuntimeError, UserFacingError):
    """The cluster cannot run the job (Ray missing, unreachable, another version, a node without the model's
    dependencies): one line that says what to do."""


@dataclass(frozen=True)
class ClusterInfo:
    address: str
    nodes: int
    cpus: float
    gpus: float

    def describe(self) -> str:
        return f"{self.nodes} node(s), {self.cpus:g} CPU(s), {self.gpus:g} GPU(s) at {self.address}"


# a ClusterInfo, or a Future of one while `on_cluster`'s connection is being made
_cluster: contextvars.ContextVar[ClusterInfo | Future | None] = contextvars.ContextVar("vitstudio_ray_cluster",
                                                                                      default=None)


def active() -> ClusterInfo | None:
    """The cluster the folder passes of this context run on (`on_cluster`), or None: in this process. Waits for a
    connection still being made (and raises its failure)."""
    value = _cluster.get()
    return value.result() if isinstance(value, Future) else value


def require_ray():
    try:
        import ray
        import ray.data  # noqa: F401  (the extra: ray[data])
    except ImportError as exc:
        raise _not_installed(exc.name or "ray") from None
    return ray


def _not_installed(name: str) -> RayJobError:
    return RayJobError(f"--ray needs Ray ({name} is not installed): {INSTALL}")


def connect(address: str | None = None) -> ClusterInfo:
    """Join the cluster at `address` (as `ray.init(address=...)` takes it), else at RAY_ADDRESS, else the instance
    `ray start --head` runs on this machine, else start a local instance for this process; a process already
    connected stays on its cluster unless another HOST:PORT is named. Every failure is one RayJobError line."""
    return _KEEPER.submit(_connect, address).result()


def _connect(address: str | None) -> ClusterInfo:
    ray = require_ray()
    address = address or os.environ.get("RAY_ADDRESS") or None
    if ray.is_initialized() and _names_another(ray, address):
        _check_reachable(address)
        ray.shutdown()
    if not ray.is_initialized():
        _check_reachable(address)
        _init(ray, address)
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its notes on each execution's start and end
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the command's own bar counts files done
    context.print_on_execution_start = False
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    total = ray.cluster_resources()
    return ClusterInfo(ray.get_runtime_context().gcs_address, len(nodes), float(total.get("CPU", 0)),
                       float(total.get("GPU", 0)))


@contextlib.contextmanager
def on_cluster(address: str | None = None):
    """Within: every folder pass (`embedcache.fill`) of this context runs its model pass on the cluster. The
    connection is made alongside: Ray's start (seconds of processes starting, a local instance's most of all) runs
    while the command imports torch, loads its model and scans the folder, and the first pass waits for it. What
    can be said at once is said before: Ray missing, an address where nothing listens."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if not _installed("ray"):
        raise _not_installed("ray")
    _check_reachable(address)
    token = _cluster.set(_KEEPER.submit(_connect, address))
    try:
        yield
    finally:
        pending = _cluster.get()
        _cluster.reset(token)
        with contextlib.suppress(Exception):  # unused, its failure is nobody's: only let the start finish
            pending.result()


def _init(ray, address: str | None) -> None:
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    address = address or _running_here()
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            # the instance on this machine reports no usage to Ray's servers unless the user opted in (each job of
            # Ray Data would also start an actor process, importing Ray, to collect the report)
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, **quiet)
    except ConnectionError as exc:
        raise RayJobError(f"cannot reach the Ray cluster at {address}: {_first_line(exc)} (start it with "
                          f"`ray start --head`, or give its address: --ray HOST:6379{_token_hint()})") from None
    except RuntimeError as exc:
        if "version" in str(exc).lower():
            raise RayJobError(f"the Ray cluster at {address} runs another version: {' '.join(str(exc).split())} "
                              f"(install the cluster's Ray and Python versions here)") from None
        raise


def _running_here() -> str | None:
    """The address of the Ray instance `ray start --head` left running on this machine, where Ray's own `ray.init()`
    finds it, if it answers: a command joins it, as `ray.init()` does (starting one of our own beside it, Ray refused
    the `num_cpus` we ask for). None: none (or one that died without `ray stop`: Ray's client would retry it for
    minutes)."""
    try:
        from ray._private.utils import read_ray_address  # Ray's own lookup for `ray.init()` without an address

        address = read_ray_address()
    except Exception:  # noqa: BLE001 (another Ray's bookkeeping: start an instance, as without one)
        return None
    if not address:
        return None
    try:
        _check_reachable(address, timeout=1.0)
    except RayJobError:
        return None
    return "auto"  # not the address itself: joined by "auto", Ray also brings the instance's token (Ray 2.5x)


def _token_hint() -> str:
    """Ray (2.5x) sends its token (~/.ray/auth_token) to an address only in token mode; a cluster `ray start`ed with
    one refuses the client for ~20 s, then says only that it cannot connect."""
    if os.environ.get("RAY_AUTH_MODE") or not (Path.home() / ".ray" / "auth_token").exists():
        return ""
    return "; a cluster with token authentication also needs RAY_AUTH_MODE=token here"


def _names_another(ray, address: str | None) -> bool:
    """A HOST:PORT other than the cluster this process is connected to."""
    if not address or "://" in address or ":" not in address:
        return False
    return address != ray.get_runtime_context().gcs_address


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """A HOST:PORT that accepts no connection is said at once (Ray's own client retries it for minutes)."""
    import socket

    if not address or "://" in address or ":" not in address:  # "auto", "local", ray://…: Ray's to resolve
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as exc:
        raise RayJobError(f"cannot reach the Ray cluster at {address}: {getattr(exc, 'strerror', None) or exc} "
                          f"(start it with `ray start --head`, or give its address: --ray HOST:6379)") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Keeper:
    """Runs what starts or joins Ray on one daemon thread, started at first use and never ended (see the module's
    docstring); each call's result or failure comes back as a Future."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue | None = None

    def submit(self, fn: Callable, *args) -> Future:
        with self._lock:
            if self._calls is None:
                self._calls = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self._calls,), name="vitstudio-ray", daemon=True).start()
        future: Future = Future()
        self._calls.put((future, fn, args))
        return future

    @staticmethod
    def _serve(calls: queue.SimpleQueue) -> None:
        while True:
            future, fn, args = calls.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 (the caller's to raise, in its thread)
                future.set_exception(exc)


_KEEPER = _Keeper()


def _installed(name: str) -> bool:
    """Whether `import name` can find the package, without importing it (Ray's import alone is a second)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False
