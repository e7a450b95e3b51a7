"""Benchmark: event-loop stalls of the GUI thread while models load, images are classified and explained,
sliders move and a background job runs.

    QT_QPA_PLATFORM=offscreen python tests/benchmarks/ui_responsiveness.py [--seconds 25]

A 5 ms QTimer probe on the GUI thread records how late each tick fires; lateness is a stall the user would feel.
Goal: p99 stall <= 16 ms, max <= 100 ms. As the app does, the objects of the imports are frozen out of the garbage
collector's sight before the window is built (workers.freeze_long_lived); `--no-freeze` measures without, the
reference for that change (issue 31: a full collection walked ~450k objects on the GUI thread).
Model: a ViT-S/16-sized custom ViT (random weights; speed does not depend on them), real photos from
scikit-image; meanwhile a small fine-tuning run trains in the background.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

VIT_S = "custom:img=224,patch=16,width=384,depth=12,heads=6,classes=1000"
TICK_MS = 5


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--no-freeze", action="store_true", help="leave the imports' objects to the collector")
    args = ap.parse_args()

    from PIL import Image
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication
    from skimage import data

    folder = Path(tempfile.mkdtemp())
    QSettings.setPath(QSettings.NativeFormat, QSettings.UserScope, str(folder / "settings"))
    images = folder / "images"
    images.mkdir()
    for i, name in enumerate(("astronaut", "chelsea", "coffee", "rocket") * 3):
        Image.fromarray(getattr(data, name)()).save(images / f"{i:02d}_{name}.jpg")

    train_data = folder / "train-data"
    for c, colour in enumerate(((220, 40, 40), (40, 200, 60), (40, 60, 220))):
        (train_data / f"c{c}").mkdir(parents=True)
        for i in range(40):
            img = Image.new("RGB", (64, 64), tuple(int(v * (0.6 + 0.01 * i)) for v in colour))
            img.save(train_data / f"c{c}" / f"{i}.png")
    os.environ["VITSTUDIO_MODELS_DIR"] = str(folder / "models")
    os.environ["VITSTUDIO_DATA_DIR"] = str(folder / "data")  # the user's remembered folder/form stay out of it

    app = QApplication.instance() or QApplication([])
    from vitstudio.gui import workers
    from vitstudio.gui.main_window import MainWindow, panel_classes

    panel_classes()  # the imports the app makes before it freezes (torch, timm, the panels)
    if not args.no_freeze:
        workers.freeze_long_lived()
    collections: list[float] = []  # seconds of each full (generation 2) collection
    started_gc = [0.0]

    def on_gc(phase, info):
        if info["generation"] == 2:
            if phase == "start":
                started_gc[0] = time.perf_counter()
            else:
                collections.append(time.perf_counter() - started_gc[0])

    import gc

    gc.callbacks.append(on_gc)

    handles = []  # every job, to report how long interactive ones waited for a thread
    original_submit = workers._submit  # both start_job and a view's ViewJobs.start hand their jobs to it

    def recording_submit(handle, fn):
        handles.append(handle)
        original_submit(handle, fn)

    workers._submit = recording_submit
    window = MainWindow()
    window.show()
    lateness: list[float] = []
    last = [time.perf_counter()]

    def tick():
        now = time.perf_counter()
        lateness.append(max(0.0, (now - last[0]) * 1000 - TICK_MS))
        last[0] = now

    probe = QTimer(interval=TICK_MS, timeout=tick)
    def start_training():  # a fine-tuning run in the background for the whole script
        panel = window.training
        panel.set_dataset(str(train_data))
        panel.dataset.base_model.setEditText("custom:img=64,patch=8,width=64,depth=4,heads=4,classes=3")
        panel.form.preset.setCurrentText("scratch")
        panel.form.advanced.setChecked(True)
        panel.form.inputs["epochs"].setValue(200)
        QTimer.singleShot(500, panel.start)

    script = [
        (0.1, start_training),
        (0.2, lambda: window.request_model(VIT_S, "cpu", "fp32")),
        (0.5, lambda: window.add_paths([str(images)])),
        (4.0, lambda: window.show_tab("attention")),
        *[(5.0 + 0.15 * i, lambda i=i: window.attention.layer.setValue(11 - i % 12)) for i in range(24)],
        (9.0, lambda: window.attention.view.patch_clicked.emit(5, 7)),
        (10.0, lambda: window.attention.method.setCurrentText("Rollout")),
        (10.5, lambda: window.attention.discard.setValue(0.9)),
        (11.0, lambda: window.attention.distance_for_folder(str(images))),  # a background job
        (12.0, lambda: window.attention.method.setCurrentText("Gradient rollout")),
        *[(13.0 + 0.5 * i, lambda i=i: window.state.select(window.state.images[i % 12])) for i in range(8)],
        (18.0, lambda: window.show_tab("embeddings")),
        *[(19.0 + 0.2 * i, lambda i=i: window.embeddings.layer.setValue(i % 12)) for i in range(12)],
        (22.0, lambda: window.show_tab("internals")),
    ]
    for at, action in script:
        QTimer.singleShot(int(at * 1000), action)
    QTimer.singleShot(int(args.seconds * 1000), app.quit)
    last[0] = time.perf_counter()
    probe.start()
    start = time.perf_counter()
    app.exec()
    probe.stop()
    elapsed = time.perf_counter() - start
    trained = len(window.training.shown.epochs["epoch"])
    if window.training.job is not None:
        window.training.job.cancel()
    from vitstudio.gui import closing  # closing over a run still cancelling asks:
    closing.ask_close_during_training = lambda *_: closing.CANCEL  # no one here to answer
    window.close()
    workers.shutdown(10000)

    values = sorted(lateness)
    p50 = statistics.median(values)
    p99 = values[int(0.99 * (len(values) - 1))]
    print(f"{len(values)} ticks over {elapsed:.1f} s ({TICK_MS} ms timer), "
          f"{len(window.state.images)} images, model {VIT_S}, a fine-tuning run in the background "
          f"({trained} epochs done meanwhile)")
    print(f"stall p50 {p50:.1f} ms   p99 {p99:.1f} ms   max {values[-1]:.1f} ms   "
          f"ticks late > 16 ms: {sum(v > 16 for v in values)}   (goal p99 <= 16 ms, max <= 100 ms)")
    print(f"full garbage collections: {len(collections)}, longest {max(collections, default=0) * 1000:.1f} ms "
          f"({'without' if args.no_freeze else 'with'} the imports frozen)")
    waits = sorted((h.started_at - h.queued_at) * 1000 for h in handles
                   if h.kind == workers.INTERACTIVE and h.started_at is not None)
    longs = sorted({h.name for h in handles if h.kind == workers.LONG})
    if waits:
        print(f"interactive jobs: {len(waits)}, queue wait p50 {statistics.median(waits):.1f} ms, max "
              f"{waits[-1]:.1f} ms, while long jobs ran on their own pool: {', '.join(longs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
