"""The soak's user (tests/benchmarks/soak.py): its data, and the script that drives the real window through the
user's path (training, explorers, model switches, the Folder tab) with the app's own widgets, one step at a time
from a GUI-thread timer, so the event loop runs exactly as it does for a person at the keyboard."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from soak_probes import keep_slowest


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
        self.timer.setObjectName("soak-driver")
        self.slow_steps: dict[str, tuple[float, int]] = {}  # the user's own actions (a click runs its slots at once)

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
            took = time.monotonic() - now
            if took > 0.05:  # what the step did before this wait: clicks, settings, tab switches
                keep_slowest(self.slow_steps, self.wait.label, took)
        except BaseException:  # the script itself broke: reported as an uncaught exception, the run ends
            self.timer.stop()
            self.done = True
            raise


class Soak:
    """The user: `script()` cycles through the phases until the driver's deadline; `phase` names the one running
    (each sample is labelled with it)."""

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
        yield Wait("dataset scan", until=lambda: panel.dataset_actions.scan is not None and "Scanning" not in
                   panel.dataset.dataset_info.text(), timeout=60)
        panel.dataset.base_model.setEditText(self.demo)
        panel.form.preset.setCurrentText("last-blocks")
        panel.form.advanced.setChecked(True)
        panel.form.inputs["epochs"].setValue(self.args.epochs)
        panel.form.inputs["batch_size"].setValue(32)
        panel.form.inputs["hflip"].setValue(0.0)
        panel.dataset.run_name.setText(f"soak-{self.cycle:03d}")
        panel.right.setCurrentWidget(panel.curves)  # the live curves on screen while it trains
        panel.controls.start_button.click()
        yield Wait("training", until=lambda: panel.job is not None and panel.job.done, timeout=900)
        self.epochs += len(panel.shown.epochs["epoch"])
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
        if self.cycle % 2 == 0 and panel.controls.use_button.isEnabled():
            before = self.loads
            panel.controls.use_button.click()
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

        for column in range(panel.table_model.columnCount()):  # a click on each header
            panel.table.sortByColumn(column, (Qt.AscendingOrder, Qt.DescendingOrder)[(column + self.cycle) % 2])
            yield Wait("sort", seconds=0.1)
        for row in (0, 3, 7):
            panel.select_row(row)
            yield Wait("similar", until=lambda: panel.side.page("similar").list.count() > 0, timeout=30)
            yield from self.settle("similar")
        panel.toolbar.min_conf.setValue(0.3)
        panel.toolbar.correctness.setCurrentIndex(2)
        yield Wait("filters", seconds=0.3)
        panel.toolbar.correctness.setCurrentIndex(0)
        panel.toolbar.min_conf.setValue(0.0)
        for index in range(panel.side.page("map").colour_by.count()):
            panel.side.page("map").colour_by.setCurrentIndex(index)
            yield Wait("colour", seconds=0.2)
        box = panel.side.page("map").map.box  # drag the yellow box: the table follows it
        box.setSize(box.size() * 1.2)
        yield Wait("box", seconds=0.3)
        panel.toolbar.follow_map.setChecked(False)
        panel.toolbar.review_button.click()
        yield Wait("label review", until=lambda: "Reviewing" not in panel.info.text(), timeout=300)
        review = panel.side.page("review")
        if review.list.count() > 0:
            panel.side.setCurrentWidget(review)
            review.list.setCurrentRow(0)
            review.exclude_button.click()
        if panel.side.page("duplicates").count() > 1:
            panel.side.setCurrentWidget(panel.side.page("duplicates"))
            panel.side.page("duplicates").setCurrentRow(1)
            yield Wait("duplicates", seconds=0.3)
            panel.side.page("duplicates").setCurrentRow(0)
        yield from self.settle("folder")
