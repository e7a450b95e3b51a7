"""Benchmark: time from process start to the first painted window, ViT Studio next to a bare Qt + pyqtgraph
window measured in the same run, interleaved.

    python tests/benchmarks/startup.py [--runs 5]

Each launch is a fresh interpreter with QT_QPA_PLATFORM=offscreen and empty settings. ViT Studio prints the
wall-clock time of its first paints (`VITSTUDIO_STARTUP_PROBE`): the main window's frame, where images can be
opened (before torch/timm have loaded: goal <= 2 s here, issue 30 item 7), and its panels (after them). The
reference imports PySide6 and pyqtgraph, shows a QMainWindow and prints its first paint. Printed: medians and
ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BARE = """
import sys, time
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow
import pyqtgraph
app = QApplication(sys.argv[:1])
win = QMainWindow()
win.setCentralWidget(QLabel("bare"))
win.resize(1280, 820)
class Probe(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Paint:
            print(f"first-paint bare {time.time():.4f}", flush=True)
            QTimer.singleShot(0, app.quit)
        return False
probe = Probe()
win.installEventFilter(probe)
win.show()
app.exec()
"""


def launch(cmd: list[str]) -> dict[str, float]:
    """Seconds from just before the process starts to each first paint it reports."""
    with tempfile.TemporaryDirectory() as cfg:
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "VITSTUDIO_STARTUP_PROBE": "1",
               "XDG_CONFIG_HOME": cfg, "HF_HUB_OFFLINE": "1"}
        started = time.time()
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300).stdout
    marks = {}
    for line in out.splitlines():
        if line.startswith("first-paint "):
            _, label, stamp, *rest = line.split()
            marks[label] = float(stamp) - started
            if rest:
                marks[f"{label} torch"] = rest[0] == "torch=True"
    return marks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    ours, bare = [], []
    for _ in range(args.runs):
        ours.append(launch([sys.executable, "main.py"]))
        bare.append(launch([sys.executable, "-c", BARE]))
    usable = statistics.median(m["main"] for m in ours)
    full = statistics.median(m["panels"] for m in ours)
    reference = statistics.median(m["bare"] for m in bare)
    torch_before = any(m.get("main torch") for m in ours)
    print(f"{'first paint (median of ' + str(args.runs) + ')':<44} {'seconds':>8} {'ratio to bare':>14}")
    print(f"{'bare Qt + pyqtgraph window (reference)':<44} {reference:8.2f} {1.0:14.2f}")
    print(f"{'ViT Studio window, images can be opened':<44} {usable:8.2f} {usable / reference:14.2f}")
    print(f"{'ViT Studio with every panel':<44} {full:8.2f} {full / reference:14.2f}")
    print(f"torch loaded before the first paint: {torch_before}; goal: usable window <= 2 s -> "
          f"{'met' if usable <= 2.0 and not torch_before else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
