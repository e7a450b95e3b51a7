"""Soak: the real window for minutes, driven through the user's path, watching for leaks and for death.

    QT_QPA_PLATFORM=offscreen python tests/benchmarks/soak.py [--minutes 10] [--interval 10] [--json FILE]

Issue 18: PySide6 6.12.0 on Python 3.11 dropped a reference to None on every call returning nothing, and the app
aborted after ~3 minutes of live training (`Fatal Python error: none_dealloc`). No test ran the window for minutes;
this one does. The MainWindow is built exactly as `main.py` builds it (`app._build_main_window`), then driven
through its own widgets (buttons clicked, sliders and combos set, tabs selected, the signals a mouse click emits)
in phases that cycle until time is up:

  training   a short run of the demo model on a few hundred digit scans (last-blocks preset), live curves on
             the Training tab, then its results, an older run from History, and (every other cycle) "Use this model"
  explorers  Predictions, Attention (head maps, rollout, gradient rollout, token maps; layers, heads, patches,
             colormaps), Embeddings (PCA, similarity, norms), Model internals, Compare (a second model)
  switch     the demo model <-> a tiny random ViT saved as a timm folder, with an explorer on screen
  folder     the Folder tab on the digits folder: table sorted and filtered, rows selected (similar images), the
             map coloured and box-selected, label review and duplicates

Every `--interval` seconds, on the GUI thread: sys.getrefcount(None), RSS, gc object count, live QObjects (the
top-level widgets and their descendants), live shiboken wrappers, Python and OS threads and open file descriptors
(these three as the most seen in the interval, polled every 0.1 s).
At the end: the samples, the least-squares slope of each per minute after a warm-up (the first 20 % of the run, or
the whole first cycle when that is longer and under half the run: by then every pool, cache and view exists, and
what still grows is what each cycle adds), and a verdict: alive (the event loop ran to the end, no uncaught
exception), None's refcount not falling (Python 3.11; from 3.12 None is immortal and its count means nothing), RSS
growth after the warm-up < 50 MB, threads and file descriptors not growing. Exit status 1 when the verdict fails;
`--json FILE` writes the samples and the verdict; `--trace N` lists the N allocation sites that grew most after
the warm-up (tracemalloc). The driver and its data are in soak_user.py, the stall probes in soak_probes.py.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # soak_user, also when this file is imported by a test
from soak_probes import (  # noqa: E402 (found through the path above)
    BEAT_MS,
    STALL_LIMIT_S,
    Collections,
    OtherLoad,
    SlowDeliveries,
    Stalls,
    StallTracer,
    slowest_first,
    timed_application,
)

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

METRICS = ("none_refs", "rss_mb", "gc_objects", "qobjects", "wrappers", "py_threads", "os_threads", "fds")
WARMUP = 0.2  # share of the run left out of the slopes
RSS_LIMIT_MB = 50.0
NONE_IMMORTAL = sys.version_info >= (3, 12)
# None's refcount moves with whatever holds None (every dict, frame, default…); the 6.12.0 bug took it from
# ~10^5 to 0 in ~3 minutes (tens of thousands a minute). Falling faster than this, or below half, fails.
NONE_SLOPE_LIMIT = 2000.0  # per minute
THREAD_SLACK, FD_SLACK = 4, 8  # pool threads expiring and coming back, a cache file open for a moment


# ----- samples ------------------------------------------------------------------------------------------
@dataclass
class Sample:
    t: float  # seconds since the window was built
    phase: str
    none_refs: int
    rss_mb: float
    gc_objects: int
    qobjects: int
    wrappers: int
    py_threads: int
    os_threads: int
    fds: int


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux
        try:
            import psutil

            return psutil.Process().memory_info().rss / 2**20
        except ImportError:
            return float("nan")


def _count(path: str) -> int:
    try:
        return len(os.listdir(path))
    except OSError:
        return -1


def live_qobjects(app) -> int:
    """QObjects under the top-level widgets (and the application's own), counted by Qt's dumpObjectTree, one
    line per object: asking Python for them (findChildren) would wrap Qt's internal children, and shiboken keeps
    such wrappers alive with their parent, so the count itself would leak ~10 wrappers a sample."""
    from PySide6.QtCore import qInstallMessageHandler

    lines: list[str] = []
    previous = qInstallMessageHandler(lambda _mode, _context, message: lines.append(message))
    try:
        for obj in [app, *app.topLevelWidgets()]:
            obj.dumpObjectTree()
    finally:
        qInstallMessageHandler(previous)
    return sum(message.count("\n") + 1 for message in lines)


def census() -> dict:
    """Live Qt wrappers and gc-tracked objects by type name: what a growing count is made of."""
    import collections

    import shiboken6

    return {"wrappers": collections.Counter(type(o).__name__ for o in shiboken6.getAllValidWrappers()),
            "objects": collections.Counter(type(o).__name__ for o in gc.get_objects())}


def grew(first: dict, last: dict, top: int = 8) -> dict:
    """The types whose counts grew most between two censuses."""
    return {kind: dict((last[kind] - first[kind]).most_common(top)) for kind in first}


def handles() -> dict:
    return {"py_threads": threading.active_count(), "os_threads": _count("/proc/self/task"),
            "fds": _count("/proc/self/fd")}


class Peaks:
    """Threads and fds polled every 0.1 s; a sample reports the most seen since the last one, so it does not
    depend on whether it landed while a training run's loader threads or a cache file happened to be open."""

    def __init__(self) -> None:
        self.peak = handles()

    def poll(self) -> None:
        self.peak = {k: max(v, self.peak[k]) for k, v in handles().items()}

    def take(self) -> dict:
        self.poll()
        peak, self.peak = self.peak, handles()
        return peak


def take_sample(t: float, phase: str, app, peaks: Peaks) -> Sample:
    import shiboken6

    return Sample(t=round(t, 1), phase=phase, none_refs=sys.getrefcount(None), rss_mb=round(rss_mb(), 1),
                  gc_objects=len(gc.get_objects()), qobjects=live_qobjects(app),
                  wrappers=len(shiboken6.getAllValidWrappers()), **peaks.take())


# ----- analysis -----------------------------------------------------------------------------------------
def slope_per_minute(ts: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys against ts (seconds), per minute."""
    n = len(ts)
    if n < 2:
        return 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    if var == 0:
        return 0.0
    return 60.0 * sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var


def analyse(samples: list[dict], run: dict) -> dict:
    """Slopes after the warm-up and the verdict. `run`: alive facts from the driver (finished, exceptions, …)."""
    end = samples[-1]["t"] if samples else 0.0
    start = samples[0]["t"] if samples else 0.0
    cut = start + WARMUP * (end - start)
    cycles = run.get("cycle_starts_s") or []
    if len(cycles) > 1 and cycles[1] <= start + 0.5 * (end - start):
        cut = max(cut, cycles[1])  # the first cycle made every pool, cache and view; what grows now is per cycle
    trained = [s["t"] for s in samples if s["phase"] == "training"]  # its end frees ~10^3 refs to None: warm-up
    ended = next((s["t"] for s in samples if trained and s["t"] > trained[0] and s["phase"] != "training"), end + 1)
    cut = max(cut, ended) if ended <= start + 0.5 * (end - start) else cut
    warm = [s for s in samples if s["t"] < cut]
    after = [s for s in samples if s["t"] >= cut]
    span_min = (after[-1]["t"] - after[0]["t"]) / 60 if len(after) > 1 else 0.0
    ts = [s["t"] for s in after]
    slopes = {m: slope_per_minute(ts, [s[m] for s in after]) for m in METRICS}
    checks, notes = {}, []

    alive = bool(run.get("finished")) and not run.get("exceptions") and len(after) >= 2
    checks["alive"] = alive
    notes.append(f"alive: event loop ran to the end={bool(run.get('finished'))}, uncaught exceptions="
                 f"{len(run.get('exceptions', []))}, "
                 f"{run.get('cycles', 0)} cycles, {run.get('epochs', 0)} epochs trained, {len(samples)} samples")
    checks["responsive"] = run.get("max_stall_s", 0.0) <= STALL_LIMIT_S
    notes.append(f"GUI stalls (a {BEAT_MS} ms heartbeat, how late it fired): longest "
                 f"{1000 * run.get('max_stall_s', 0):.0f} ms, p99 {1000 * run.get('p99_stall_s', 0):.0f} ms, "
                 f"{run.get('stalls_over_limit', 0)} over "
                 f"{1000 * STALL_LIMIT_S:.0f} ms (limit: none)")
    if NONE_IMMORTAL:
        checks["none_flat"] = True
        notes.append(f"None refcount: Python {sys.version_info.major}.{sys.version_info.minor} makes None immortal "
                     "(PEP 683): its count is a constant and says nothing; not checked")
    elif after:
        first, low = after[0]["none_refs"], min(s["none_refs"] for s in after)
        checks["none_flat"] = slopes["none_refs"] > -NONE_SLOPE_LIMIT and low > first / 2
        notes.append(f"None refcount: slope {slopes['none_refs']:+.0f}/min (falling faster than "
                     f"{NONE_SLOPE_LIMIT:.0f}/min fails), lowest {low} vs {first} after the warm-up; rising is "
                     "harmless (references kept, e.g. numpy 2.4's np.dtype(tuple), which pyqtgraph's mkColor calls "
                     "on every curve update, keeps one each call)")
    growth = slopes["rss_mb"] * span_min
    checks["rss_bounded"] = bool(after) and growth < RSS_LIMIT_MB
    notes.append(f"RSS: {growth:+.1f} MB over the {span_min:.1f} min after the warm-up (limit {RSS_LIMIT_MB:.0f} MB)")
    for key, metric, slack in (("threads_bounded", "os_threads", THREAD_SLACK),
                               ("threads_bounded_py", "py_threads", THREAD_SLACK),
                               ("fds_bounded", "fds", FD_SLACK)):
        # the counts are peaks per interval; the warm-up's peak covers a whole cycle (training included)
        ceiling = max(s[metric] for s in warm) + slack if warm else float("inf")
        top = max(s[metric] for s in after) if after else 0
        fitted = slopes[metric] * span_min
        checks[key] = len(after) >= 2 and top <= ceiling and fitted < 2 * slack
        notes.append(f"{metric} (peak per interval): at most {top} after the warm-up (warm-up peak + {slack} = "
                     f"{ceiling:g}), fitted growth {fitted:+.1f} (limit +{2 * slack})")
    checks["threads_bounded"] = checks.pop("threads_bounded") and checks.pop("threads_bounded_py")
    return {"ok": all(checks.values()), "checks": checks, "slopes_per_min": slopes, "notes": notes,
            "warmup_s": round(cut - start, 1), "python": sys.version.split()[0], **run}


def report(samples: list[dict], verdict: dict) -> str:
    head = f"{'t s':>7} {'phase':<10}" + "".join(f"{m:>12}" for m in METRICS)
    rows = [head] + [f"{s['t']:7.1f} {s['phase']:<10}" + "".join(f"{s[m]:>12}" for m in METRICS) for s in samples]
    rows.append(f"slope/min after {verdict['warmup_s']:.0f} s".ljust(18) + "".join(
        f"{verdict['slopes_per_min'][m]:>12.1f}" for m in METRICS))
    rows += [f"  {n}" for n in verdict["notes"]]
    if verdict.get("setup_s"):
        rows.append(f"  seconds spent outside the soak: {verdict['setup_s']}")
    for kind, counts in (verdict.get("grew_by_type") or {}).items():
        rows.append(f"  {kind} that grew most after the warm-up: " + (", ".join(
            f"{name} +{n}" for name, n in counts.items()) or "none"))
    for name, took, times in verdict.get("slow_deliveries") or []:
        rows.append(f"  delivery over 50 ms: {name} {1000 * took:.0f} ms at most, {times} times")
    rows += Collections.rows(verdict.get("collections") or {})
    for name, took, times in verdict.get("slow_steps") or []:
        rows.append(f"  user step over 50 ms (a click's own work): before '{name}' {1000 * took:.0f} ms at most, "
                    f"{times} times")
    for late, t, doing in verdict.get("worst_stalls") or []:
        busy = OtherLoad.at(verdict.get("others_cores") or [], t)
        rows.append(f"  stall {1000 * late:6.0f} ms at {t:7.1f} s during {doing}"
                    + (f" (other processes: {busy:.1f} cores)" if busy is not None else ""))
    if verdict.get("exceptions"):
        rows.append("uncaught exceptions:\n" + "\n".join(verdict["exceptions"][:5]))
    if verdict.get("stuck"):
        rows.append(f"steps that timed out (went on): {', '.join(verdict['stuck'][:10])}")
    if verdict.get("job_errors"):
        rows.append(f"errors shown to the user: {len(verdict['job_errors'])}, e.g. {verdict['job_errors'][:3]}")
    failed = [k for k, v in verdict["checks"].items() if not v]
    rows.append(f"VERDICT: {'PASS' if verdict['ok'] else 'FAIL'} — " + (
        "alive, responsive, None refcount flat, RSS bounded, threads and fds bounded" if verdict["ok"] else
        f"failed: {', '.join(failed)}"))
    return "\n".join(rows)


# ----- main ---------------------------------------------------------------------------------------------
def run_soak(minutes: float, interval: float, images: int = 300, epochs: int = 3, device: str = "auto",
             json_path: str | None = None, quiet: bool = False, trace: int = 0, stall_traces: int = 0) -> dict:
    """Run the soak; returns the verdict (with the samples under 'samples'). `trace`: print that many of the
    allocation sites that grew most after the warm-up (tracemalloc, started then; slows the rest down)."""
    import tracemalloc
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="vitstudio-soak-"))
    os.environ["VITSTUDIO_MODELS_DIR"] = str(work / "models")
    os.environ["VITSTUDIO_CACHE_DIR"] = str(work / "cache")
    os.environ["VITSTUDIO_DATA_DIR"] = str(work / "data")  # settings and journals: not the user's, not restored
    from PySide6.QtCore import QSettings, Qt, QTimer
    from PySide6.QtWidgets import QApplication

    for fmt in (QSettings.NativeFormat, QSettings.IniFormat):
        QSettings.setPath(fmt, QSettings.UserScope, str(work / "settings"))
    app = QApplication.instance() or (timed_application() if stall_traces else QApplication)([sys.argv[0]])
    app.setApplicationName("ViT Studio")
    app.setOrganizationName("ViT Studio")
    from soak_user import Driver, Soak, make_data

    data = make_data(work, images)
    made = time.monotonic()

    exceptions: list[str] = []
    old_hook = sys.excepthook

    def hook(kind, value, tb):
        exceptions.append("".join(traceback.format_exception(kind, value, tb))[-2000:])
        old_hook(kind, value, tb)

    sys.excepthook = hook
    threading.excepthook = lambda a: exceptions.append(f"thread {a.thread}: {a.exc_type.__name__}: {a.exc_value}")

    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.gui.app import _build_main_window, parse_args

    deliveries = SlowDeliveries()  # before the window's first job makes the dispatcher
    collections_ = Collections()

    args = argparse.Namespace(epochs=epochs, device=device)
    window = _build_main_window(parse_args([*data["images"], "--model", str(bundled_demo()), "--device", device]))
    window.show()
    soak = Soak(app, window, data, args)
    t0 = time.monotonic()
    data_s = round(made - began, 1)
    driver = Driver(app, soak.script(), t0 + minutes * 60)
    samples: list[dict] = []
    stalls = Stalls(BEAT_MS / 1000)
    tracer = StallTracer(stalls) if stall_traces else None
    peaks, others = Peaks(), OtherLoad()
    polled = {"at": 0.0}

    def beat() -> None:
        now = time.monotonic()
        stalls.beat(now, f"{soak.phase}: {driver.wait.label if driver.wait else '-'}", now - t0)
        if now - polled["at"] >= 0.1:
            peaks.poll()
            polled["at"] = now

    traced: list = []  # (t, snapshot) with --trace: where the memory that stays was allocated

    censuses: list[dict] = []  # at the end of the warm-up and at the end

    def sample() -> None:
        try:
            measure()
        finally:
            stalls.last = None  # the soak's own measuring (a census walks every object) is not the app's stall

    def measure() -> None:
        samples.append(asdict(take_sample(time.monotonic() - t0, soak.phase, app, peaks)))
        t = samples[-1]["t"]
        others.mark(t)
        if not censuses and t >= WARMUP * minutes * 60 and (len(soak.cycle_starts) > 1 or t >= minutes * 30):
            censuses.append(census())
        if trace and samples[-1]["t"] >= WARMUP * minutes * 60:
            if not tracemalloc.is_tracing():  # from the warm-up on: what is allocated after it and stays
                tracemalloc.start(10)
                return
            traced[1:] = [tracemalloc.take_snapshot()]
            traced[:1] = traced[:1] or traced[1:]
        if not quiet:
            s = samples[-1]
            print(f"{s['t']:7.1f} {s['phase']:<10}" + "".join(f"{s[m]:>12}" for m in METRICS), flush=True)

    stop = {"at": time.monotonic()}

    def finish() -> None:
        if not driver.done:
            return
        stop["at"] = time.monotonic()
        finisher.stop()
        sampler.stop()
        sample()  # the last one before closing: what a long session would carry on with
        if censuses:
            censuses.append(census())
        panel = window.training
        if panel.running:
            panel.cancel()
        from vitstudio.gui import closing  # closing over a run still cancelling asks:
        closing.ask_close_during_training = lambda *_: closing.CANCEL  # no one here to answer
        window.close()  # cancels and joins every job (closeEvent)
        app.quit()

    heartbeat = QTimer(interval=BEAT_MS, timeout=beat)
    heartbeat.setTimerType(Qt.PreciseTimer)
    sampler = QTimer(interval=int(interval * 1000), timeout=sample)
    finisher = QTimer(interval=200, timeout=finish)
    for name, timer in (("heartbeat", heartbeat), ("sampler", sampler), ("finisher", finisher)):
        timer.setObjectName(f"soak-{name}")
        timer.start()
    if not quiet:
        print(f"soak: {minutes:g} min, a sample every {interval:g} s, Python {sys.version.split()[0]}, "
              f"PySide6 {__import__('PySide6').__version__}, work folder {work}", flush=True)
        print(f"{'t s':>7} {'phase':<10}" + "".join(f"{m:>12}" for m in METRICS), flush=True)
    sample()
    driver.start()
    app.exec()
    closed = time.monotonic()
    heartbeat.stop()
    sys.excepthook = old_hook
    run = {"finished": driver.finished, "exceptions": exceptions, **stalls.summary(),
           "slow_deliveries": deliveries.report(), "collections": collections_.summary(since=t0),
           "others_cores": others.series,
           "slow_steps": slowest_first(driver.slow_steps),
           "cycles": soak.cycle, "cycle_starts_s": [round(c - t0, 1) for c in soak.cycle_starts],
           "epochs": soak.epochs, "model_loads": soak.loads, "stuck": driver.stuck,
           "job_errors": soak.job_errors, "minutes": minutes, "interval_s": interval,
           "pyside6": __import__("PySide6").__version__, "setup_s": {"data": data_s, "window": round(t0 - made, 1),
                                                                     "close": round(closed - stop["at"], 1)}}
    if len(censuses) == 2:
        run["grew_by_type"] = grew(*censuses)
    verdict = analyse(samples, run)
    verdict["samples"] = samples
    if not quiet:
        print(report(samples, verdict), flush=True)
    if len(traced) == 2:
        print("grown most between the first and the last sample after the warm-up (tracemalloc):")
        for stat in traced[1].compare_to(traced[0], "traceback")[:trace]:
            print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
            for line in stat.traceback.format()[-8:]:
                print("      " + line)
    for key, worst, times in slowest_first(getattr(app, "slowest", {}))[:20]:
        print(f"  event over 50 ms: {key}: {1000 * worst:.0f} ms at most, {times} times")
    if tracer is not None:
        print("the GUI thread's stacks seen most during stalls (20 ms samples):")
        for count, stack in tracer.top(stall_traces):
            print(f"  {count} samples:\n      " + stack.replace("\n", "\n      "))
    if json_path:
        Path(json_path).write_text(json.dumps(verdict, indent=1))
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return verdict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--images", type=int, default=300, help="digit scans in the training / folder dataset")
    ap.add_argument("--epochs", type=int, default=3, help="epochs of each training run")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--json", metavar="FILE", help="write the samples and the verdict here")
    ap.add_argument("--trace", type=int, default=0, metavar="N", help="hunting a leak: print the N allocation "
                    "sites that grew most after the warm-up (tracemalloc, several times slower)")
    ap.add_argument("--stall-traces", type=int, default=0, metavar="N", help="hunting a stall: print the N "
                    "stacks of the GUI thread seen most while it was late (a watchdog thread samples them)")
    args = ap.parse_args(argv)
    verdict = run_soak(args.minutes, args.interval, args.images, args.epochs, args.device, args.json,
                       trace=args.trace, stall_traces=args.stall_traces)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if verdict["ok"] else 1)  # the window is closed and every job joined; skip tearing torch/Qt down


if __name__ == "__main__":
    raise SystemExit(main())
