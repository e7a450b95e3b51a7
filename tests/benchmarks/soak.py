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
top-level widgets and their descendants), live shiboken wrappers, Python and OS threads, open file descriptors.
At the end: the samples, the least-squares slope of each per minute after a warm-up (the first 20 % of the run, or
the whole first cycle when that is longer and under half the run: by then every pool, cache and view exists, and
what still grows is what each cycle adds), and a verdict: alive (the event loop ran to the end, no uncaught exception), None's refcount not falling (Python
3.11; from 3.12 None is immortal and its count means nothing), RSS growth after the warm-up < 50 MB, threads and
file descriptors not growing. Exit status 1 when the verdict fails; `--json FILE` writes samples and verdict.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

METRICS = ("none_refs", "rss_mb", "gc_objects", "qobjects", "wrappers", "py_threads", "os_threads", "fds")
WARMUP = 0.2  # share of the run left out of the slopes
RSS_LIMIT_MB = 50.0
NONE_IMMORTAL = sys.version_info >= (3, 12)
# None's refcount moves with whatever holds None (every dict, frame, default…); the 6.12.0 bug took it from
# ~10^5 to 0 in ~3 minutes (tens of thousands a minute). Falling faster than this, or below half, fails.
NONE_SLOPE_LIMIT = 2000.0  # per minute
THREAD_SLACK, FD_SLACK = 3, 8  # pool threads expiring and coming back, a cache file open for a moment


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
    """Top-level widgets and every QObject below them, plus the application's own children."""
    from PySide6.QtCore import QObject

    tops = app.topLevelWidgets()
    return len(tops) + sum(len(w.findChildren(QObject)) for w in tops) + len(app.findChildren(QObject))


def take_sample(t: float, phase: str, app) -> Sample:
    import shiboken6

    return Sample(t=round(t, 1), phase=phase, none_refs=sys.getrefcount(None), rss_mb=round(rss_mb(), 1),
                  gc_objects=len(gc.get_objects()), qobjects=live_qobjects(app),
                  wrappers=len(shiboken6.getAllValidWrappers()), py_threads=threading.active_count(),
                  os_threads=_count("/proc/self/task"), fds=_count("/proc/self/fd"))


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
    after = [s for s in samples if s["t"] >= cut]
    span_min = (after[-1]["t"] - after[0]["t"]) / 60 if len(after) > 1 else 0.0
    ts = [s["t"] for s in after]
    slopes = {m: slope_per_minute(ts, [s[m] for s in after]) for m in METRICS}
    checks, notes = {}, []

    alive = bool(run.get("finished")) and not run.get("exceptions") and len(after) >= 2
    checks["alive"] = alive
    notes.append(f"alive: event loop ran to the end={bool(run.get('finished'))}, uncaught exceptions="
                 f"{len(run.get('exceptions', []))}, longest GUI stall {run.get('max_stall_s', 0):.1f} s, "
                 f"{run.get('cycles', 0)} cycles, {run.get('epochs', 0)} epochs trained, {len(samples)} samples")
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
        # a sample may land while a training run's loader threads or a cache file are open: medians of the
        # first and last thirds after the warm-up, not single samples, say whether the count creeps up
        third = max(1, len(after) // 3)
        first, last = (statistics.median(s[metric] for s in part) for part in (after[:third], after[-third:]))
        fitted = slopes[metric] * span_min
        checks[key] = len(after) >= 2 and last - first <= slack and fitted < 2 * slack
        notes.append(f"{metric}: median {first:g} -> {last:g} (first -> last third after the warm-up, limit "
                     f"+{slack}), fitted growth {fitted:+.1f} (limit +{2 * slack}), max {max(s[metric] for s in after)}")
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
    if verdict.get("exceptions"):
        rows.append("uncaught exceptions:\n" + "\n".join(verdict["exceptions"][:5]))
    if verdict.get("stuck"):
        rows.append(f"steps that timed out (went on): {', '.join(verdict['stuck'][:10])}")
    if verdict.get("job_errors"):
        rows.append(f"errors shown to the user: {len(verdict['job_errors'])}, e.g. {verdict['job_errors'][:3]}")
    failed = [k for k, v in verdict["checks"].items() if not v]
    rows.append(f"VERDICT: {'PASS' if verdict['ok'] else 'FAIL'} — " + (
        "alive, None refcount flat, RSS bounded, threads and fds bounded" if verdict["ok"] else
        f"failed: {', '.join(failed)}"))
    return "\n".join(rows)


# ----- data ---------------------------------------------------------------------------------------------
def load_digits():
    """scikit-learn's digits ((n, 8, 8) ink 0..16, labels), read from its data file: importing sklearn takes
    seconds on a loaded machine, and the soak's one-minute version runs in the test suite."""
    import importlib.util

    import numpy as np

    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz" if spec else None
    if path is None or not path.is_file():
        from sklearn.datasets import load_digits as sk_load_digits

        digits = sk_load_digits()
        return digits.images, digits.target
    table = np.loadtxt(path, delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)


def make_data(root: Path, images: int) -> dict:
    """A digits folder (one subfolder per class, one 3 planted among the fives), explorer images, a tiny ViT."""
    import numpy as np
    import timm
    import torch
    from PIL import Image
    from skimage import data as skdata
    from timm.models import save_for_hf

    from vitstudio.core.models.demo import sample_images

    pictures, targets = load_digits()
    folder = root / "digits"
    per_class = max(4, images // 10)
    seen: dict[int, int] = {}
    for i, (pixels, label) in enumerate(zip(pictures, targets)):
        label = int(label)
        if seen.get(label, 0) >= per_class:
            continue
        seen[label] = seen.get(label, 0) + 1
        planted = label == 3 and seen[label] == 1
        ink = (255 - pixels / 16.0 * 255).astype(np.uint8)
        img = Image.fromarray(ink, "L").resize((32, 32), Image.BILINEAR).convert("RGB")
        (folder / str(5 if planted else label)).mkdir(parents=True, exist_ok=True)
        img.save(folder / str(5 if planted else label) / f"{i:04d}.png")
        if len(seen) == 10 and all(v >= per_class for v in seen.values()):
            break
    shown = root / "shown"
    shown.mkdir()
    for name in ("astronaut", "chelsea"):
        Image.fromarray(getattr(skdata, name)()).save(shown / f"{name}.jpg")
    torch.manual_seed(0)
    tiny = timm.create_model("vit_base_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                             depth=2, num_heads=2, num_classes=10)
    save_for_hf(tiny, str(root / "tiny-vit"), safe_serialization=True)
    return {"digits": folder, "images": [str(p) for p in sample_images()[:6]] + [str(p) for p in shown.iterdir()],
            "tiny": str(root / "tiny-vit")}


# ----- the driver ---------------------------------------------------------------------------------------
@dataclass
class Wait:
    label: str
    until: object = None  # a predicate, or None for a plain pause
    seconds: float = 0.0
    timeout: float = 60.0


class Driver:
    """Runs a generator script on the GUI thread: each step yields a Wait; a 50 ms timer resumes it."""

    def __init__(self, app, script, deadline: float) -> None:
        from PySide6.QtCore import QTimer

        self.app, self.script, self.deadline = app, script, deadline
        self.wait: Wait | None = None
        self.since = time.monotonic()
        self.stuck: list[str] = []
        self.finished = False  # the deadline came with the script still going: the event loop ran to the end
        self.done = False  # stopped, either way
        self.timer = QTimer(interval=50, timeout=self._tick)

    def start(self) -> None:
        self.timer.start()

    def _tick(self) -> None:
        now = time.monotonic()
        if now >= self.deadline:
            self.timer.stop()
            self.script.close()
            self.finished = self.done = True
            return
        w = self.wait
        if w is not None:
            waited = now - self.since
            if waited < w.seconds:
                return
            if w.until is not None and not w.until():
                if waited < w.timeout:
                    return
                self.stuck.append(w.label)
        try:
            self.wait, self.since = next(self.script), now
        except BaseException:  # the script itself broke: reported as an uncaught exception, the run ends
            self.timer.stop()
            self.done = True
            raise


class Soak:
    def __init__(self, app, window, data: dict, args) -> None:
        from vitstudio.core.models.demo import bundled_demo
        from vitstudio.gui import workers

        self.app, self.w, self.data, self.args = app, window, data, args
        self.workers = workers
        self.demo = str(bundled_demo())
        self.phase = "start"
        self.cycle = 0
        self.loads = 0
        self.epochs = 0
        self.job_errors: list[str] = []
        self.cycle_starts: list[float] = []
        window.state.model_loaded.connect(self._on_loaded)
        window.state.message.connect(self._on_message)

    def _on_loaded(self, _model) -> None:
        self.loads += 1

    def _on_message(self, level: str, text: str) -> None:
        if level == "error":
            self.job_errors.append(text[:200])

    # -- waiting helpers ---------------------------------------------------------------------------------
    def settle(self, label: str, timeout: float = 60.0):
        """Let debounced controls fire, then wait for the interactive jobs they started."""
        yield Wait(label, seconds=0.2)
        yield Wait(label, until=lambda: not [h for h in self.workers.running_jobs()
                                             if h.kind == self.workers.INTERACTIVE], timeout=timeout)

    def load(self, spec: str, label: str):
        """Pick a model in the model bar and press Load."""
        before = self.loads
        bar = self.w.model_panel
        index = bar.name.findData(spec)
        if index >= 0:
            bar.name.setCurrentIndex(index)
        else:
            bar.name.setEditText(spec)
        bar.load_button.click()
        yield Wait(label, until=lambda: self.loads > before, timeout=120)
        yield from self.settle(label)

    # -- the script -----------------------------------------------------------------------------------------
    def script(self):
        w = self.w
        bar = w.model_panel
        bar.device.setCurrentText(self.args.device)
        yield Wait("first model", until=lambda: w.state.model is not None and len(w.state.images) >= len(
            self.data["images"]), timeout=120)
        while True:
            self.cycle += 1
            self.cycle_starts.append(time.monotonic())
            for name, phase in (("training", self.training), ("explorers", self.explorers),
                                ("switch", self.switch), ("folder", self.folder)):
                self.phase = name
                yield from phase()

    def training(self):
        w, panel = self.w, self.w.training
        w.show_tab("training")
        panel.set_dataset(str(self.data["digits"]))  # what dropping the folder on the panel does
        yield Wait("dataset scan", until=lambda: panel.scan is not None and "Scanning" not in
                   panel.dataset_info.text(), timeout=60)
        panel.base_model.setEditText(self.demo)
        panel.form.preset.setCurrentText("last-blocks")
        panel.form.advanced.setChecked(True)
        panel.form.inputs["epochs"].setValue(self.args.epochs)
        panel.form.inputs["batch_size"].setValue(32)
        panel.form.inputs["hflip"].setValue(0.0)
        panel.run_name.setText(f"soak-{self.cycle:03d}")
        panel.right.setCurrentWidget(panel.curves)  # the live curves on screen while it trains
        panel.start_button.click()
        yield Wait("training", until=lambda: panel.job is not None and panel.job.done, timeout=900)
        self.epochs += len(panel.curves_data["epoch"])
        yield Wait("results", until=lambda: panel.results.report is not None, timeout=30)
        panel.right.setCurrentWidget(panel.results)
        yield from self.settle("results")
        panel.right.setCurrentWidget(panel.probe_history)
        yield Wait("probe", seconds=0.3)
        if panel.history.count() > 1:  # an older run from History, then the new one again
            panel.history.itemClicked.emit(panel.history.item(panel.history.count() - 1))
            yield from self.settle("history")
            panel.history.itemClicked.emit(panel.history.item(0))
            yield from self.settle("history")
        if self.cycle % 2 == 0 and panel.use_button.isEnabled():
            before = self.loads
            panel.use_button.click()
            yield Wait("use this model", until=lambda: self.loads > before, timeout=120)
            yield from self.settle("use this model")

    def explorers(self):
        w = self.w
        yield from self.load(self.demo, "demo model")
        w.show_tab("predictions")
        for row in range(w.strip.count()):
            w.strip.setCurrentRow(row)
            yield from self.settle("predictions")
        w.strip.setCurrentRow(0)
        yield from self.attention()
        yield from self.embeddings()
        w.show_tab("internals")
        yield from self.settle("internals")
        yield from self.compare()

    def attention(self):
        w, att = self.w, self.w.attention
        w.show_tab("attention")
        yield from self.settle("attention")
        for index in range(att.method.count()):
            if not att.method.model().item(index).isEnabled():
                continue
            att.method.setCurrentIndex(index)
            method = att.method.currentData()
            if method == "token":
                att.view.patch_clicked.emit(self.cycle % 8, (3 * self.cycle) % 8)  # a click on the image
                yield from self.settle("token map")
                att.direction.setCurrentIndex(1 - att.direction.currentIndex())
            if method == "rollout":
                att.fusion.setCurrentIndex(self.cycle % att.fusion.count())
                att.discard.setValue(0.1 * (self.cycle % 5))
            if method == "gradient-rollout":
                att.target.setCurrentIndex(self.cycle % att.target.count())
            yield from self.settle(method)
            for layer in range(att.layer.maximum() + 1):
                att.layer.setValue(layer)
                att.head.setValue(layer % (att.head.maximum() + 1))
                yield from self.settle(f"{method} layer")
        att.cmap.setCurrentIndex(self.cycle % att.cmap.count())
        att.opacity.setValue(30 + 10 * (self.cycle % 6))
        att.smooth.setChecked(not att.smooth.isChecked())
        w.strip.setCurrentRow(1 % w.strip.count())
        yield from self.settle("attention image")

    def embeddings(self):
        w, emb = self.w, self.w.embeddings
        w.show_tab("embeddings")
        yield from self.settle("embeddings")
        for index in range(emb.mode.count()):
            emb.mode.setCurrentIndex(index)
            if emb.mode.currentData() == "similarity":
                emb.view.patch_clicked.emit((self.cycle + 2) % 8, self.cycle % 8)
            for layer in range(emb.layer.maximum() + 1):
                emb.layer.setValue(layer)
                yield from self.settle("embeddings layer")
        emb.fixed.setChecked(not emb.fixed.isChecked())
        yield from self.settle("embeddings basis")

    def compare(self):
        w, cmp = self.w, self.w.compare
        w.show_tab("compare")
        before = cmp.other
        cmp.other_name.setEditText(self.data["tiny"])
        cmp.load_button.click()
        yield Wait("second model", until=lambda: cmp.other is not None and cmp.other is not before, timeout=60)
        for index in range(cmp.view_kind.count()):
            if cmp.view_kind.model().item(index).isEnabled():
                cmp.view_kind.setCurrentIndex(index)
                yield from self.settle("compare")

    def switch(self):
        """Model switches with explorers on screen: tiny <-> demo."""
        w = self.w
        for tab, spec in (("attention", self.data["tiny"]), ("embeddings", self.demo),
                          ("predictions", self.data["tiny"])):
            w.show_tab(tab)
            yield from self.load(spec, f"switch on {tab}")
            w.attention.layer.setValue(w.attention.layer.maximum())
            yield from self.settle("after switch")

    def folder(self):
        w, panel = self.w, self.w.folder
        w.show_tab("folder")
        before = panel.results
        panel.open_folder(str(self.data["digits"]))  # what Open folder… does with the chosen folder
        yield Wait("folder scan", until=lambda: panel.results is not None and panel.results is not before,
                   timeout=300)
        yield Wait("folder map", until=lambda: panel.coords is not None and len(panel.coords) == len(panel.results),
                   timeout=120)
        from PySide6.QtCore import Qt

        for column in range(panel.model.columnCount()):  # a click on each header
            panel.table.sortByColumn(column, (Qt.AscendingOrder, Qt.DescendingOrder)[(column + self.cycle) % 2])
            yield Wait("sort", seconds=0.1)
        for row in (0, 3, 7):
            panel.select_row(row)
            yield Wait("similar", until=lambda: panel.similar.count() > 0, timeout=30)
            yield from self.settle("similar")
        panel.min_conf.setValue(0.3)
        panel.correctness.setCurrentIndex(2)
        yield Wait("filters", seconds=0.3)
        panel.correctness.setCurrentIndex(0)
        panel.min_conf.setValue(0.0)
        for index in range(panel.colour_by.count()):
            panel.colour_by.setCurrentIndex(index)
            yield Wait("colour", seconds=0.2)
        box = panel.map.box  # drag the yellow box: the table follows it
        box.setSize(box.size() * 1.2)
        yield Wait("box", seconds=0.3)
        panel.follow_map.setChecked(False)
        panel.review_button.click()
        yield Wait("label review", until=lambda: "Reviewing" not in panel.info.text(), timeout=300)
        if panel.review.count() > 0:
            panel.side.setCurrentIndex(2)
            panel.review.setCurrentRow(0)
            panel.review_tab.exclude_button.click()
        if panel.duplicates.count() > 1:
            panel.side.setCurrentIndex(3)
            panel.duplicates.setCurrentRow(1)
            yield Wait("duplicates", seconds=0.3)
            panel.duplicates.setCurrentRow(0)
        yield from self.settle("folder")


# ----- main ---------------------------------------------------------------------------------------------
def run_soak(minutes: float, interval: float, images: int = 300, epochs: int = 3, device: str = "auto",
             json_path: str | None = None, quiet: bool = False, trace: int = 0) -> dict:
    """Run the soak; returns the verdict (with the samples under 'samples'). `trace`: print that many of the
    allocation sites that grew most after the warm-up (tracemalloc, started then; slows the rest down)."""
    import tracemalloc
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="vitstudio-soak-"))
    os.environ["VITSTUDIO_MODELS_DIR"] = str(work / "models")
    os.environ["VITSTUDIO_CACHE_DIR"] = str(work / "cache")
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    for fmt in (QSettings.NativeFormat, QSettings.IniFormat):
        QSettings.setPath(fmt, QSettings.UserScope, str(work / "settings"))
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("ViT Studio")
    app.setOrganizationName("ViT Studio")
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

    args = argparse.Namespace(epochs=epochs, device=device)
    window = _build_main_window(parse_args([*data["images"], "--model", str(bundled_demo()), "--device", device]))
    window.show()
    soak = Soak(app, window, data, args)
    t0 = time.monotonic()
    data_s = round(made - began, 1)
    driver = Driver(app, soak.script(), t0 + minutes * 60)
    samples: list[dict] = []
    stall = {"last": time.monotonic(), "max": 0.0}

    def beat() -> None:
        now = time.monotonic()
        stall["max"] = max(stall["max"], now - stall["last"])
        stall["last"] = now

    traced: list = []  # (t, snapshot) with --trace: where the memory that stays was allocated

    def sample() -> None:
        samples.append(asdict(take_sample(time.monotonic() - t0, soak.phase, app)))
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
        panel = window.training
        if panel.running:
            panel.cancel()
        window.close()  # cancels and joins every job (closeEvent)
        app.quit()

    heartbeat = QTimer(interval=100, timeout=beat)
    sampler = QTimer(interval=int(interval * 1000), timeout=sample)
    finisher = QTimer(interval=200, timeout=finish)
    for timer in (heartbeat, sampler, finisher):
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
    run = {"finished": driver.finished, "exceptions": exceptions, "max_stall_s": round(stall["max"], 2),
           "cycles": soak.cycle, "cycle_starts_s": [round(c - t0, 1) for c in soak.cycle_starts], "epochs": soak.epochs, "model_loads": soak.loads, "stuck": driver.stuck,
           "job_errors": soak.job_errors, "minutes": minutes, "interval_s": interval,
           "pyside6": __import__("PySide6").__version__, "setup_s": {"data": data_s, "window": round(t0 - made, 1),
                                                                     "close": round(closed - stop["at"], 1)}}
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
    args = ap.parse_args(argv)
    verdict = run_soak(args.minutes, args.interval, args.images, args.epochs, args.device, args.json,
                       trace=args.trace)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if verdict["ok"] else 1)  # the window is closed and every job joined; skip tearing torch/Qt down


if __name__ == "__main__":
    raise SystemExit(main())
