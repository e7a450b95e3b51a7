"""GUI entry point: `python main.py [IMAGES...] [--model NAME_OR_PATH] [--weights FILE] [--screenshot PNG]`."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="vitstudio-gui", description="ViT Studio desktop app")
    ap.add_argument("images", nargs="*", help="image files or folders to open")
    ap.add_argument("--model", help="model to load at start (default: the last one used)")
    ap.add_argument("--weights", help="weights file for --model")
    ap.add_argument("--device", default=None, help="auto (CUDA > MPS > CPU), cpu, cuda, cuda:N, mps "
                    "(default: the last one used)")
    ap.add_argument("--precision", default=None, help="auto, fp32, bf16 or fp16 (default: the last one used; "
                    "auto at first: bf16 on GPUs that support it)")
    ap.add_argument("--compare", metavar="NAME_OR_PATH", help="second model for the Compare tab")
    ap.add_argument("--tab", help="open on this tab: predictions, attention, embeddings, internals, compare, "
                    "folder, training")
    ap.add_argument("--screenshot", metavar="PNG", help="render the window once everything requested has "
                    "finished, save it, and exit")
    return ap.parse_args(argv)


def _disconnect(signal, slot) -> None:
    try:
        signal.disconnect(slot)
    except (RuntimeError, TypeError):  # already disconnected
        pass


def _no_display() -> bool:
    return (sys.platform.startswith("linux") and not os.environ.get("DISPLAY")
            and not os.environ.get("WAYLAND_DISPLAY") and not os.environ.get("QT_QPA_PLATFORM"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if _no_display():
        if not args.screenshot:
            print("No display found (DISPLAY/WAYLAND_DISPLAY unset). Run on a desktop, under `xvfb-run`, or "
                  "with QT_QPA_PLATFORM=offscreen together with --screenshot PNG.", file=sys.stderr)
            return 2
        os.environ["QT_QPA_PLATFORM"] = "offscreen"

    from .binding import binding_problem

    problem = binding_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2

    from PySide6.QtWidgets import QApplication

    from . import workers
    from .crash_log import CrashLog
    from .startup import FirstPaintProbe, LoadingWindow, import_heavy, probing

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("ViT Studio")
    app.setOrganizationName("ViT Studio")
    crash_log = CrashLog()
    crash_log.begin()
    app.aboutToQuit.connect(crash_log.end)
    loading = LoadingWindow()  # the window shows now; torch and timm load behind it
    if probing():
        FirstPaintProbe(loading, "loading")
    loading.show()
    opened = {}

    def open_main_window(_result=None) -> None:
        workers.freeze_long_lived()  # the libraries are imported; nothing else is loaded yet
        opened["window"] = window = _build_main_window(args)
        if crash_log.previous_crash:
            window.show_warning(crash_log.previous_crash)
        if probing():  # a screenshot run quits once it has taken its picture
            FirstPaintProbe(window, "main", quit_after=not args.screenshot)
        window.show()
        loading.close()

    def failed(exc: BaseException) -> None:
        loading.message.setText(f"Could not load PyTorch/timm: {workers.describe(exc)}")

    workers.start_job("Loading libraries", import_heavy, on_result=open_main_window, on_error=failed,
                      kind=workers.LONG)
    return app.exec()


def _build_main_window(args):
    """The main window, with what the command line and the saved settings ask for (runs on the GUI thread)."""
    from vitstudio.core.models.demo import bundled_demo, sample_images

    from .main_window import MainWindow
    from .screenshot import screenshot_when_idle

    window = MainWindow()
    settings = window.settings
    demo = bundled_demo()
    spec = args.model or settings.value("model", "") or (str(demo) if demo else "")
    device = args.device or settings.value("device", "auto")
    precision = args.precision or settings.value("precision", "auto")
    if spec:
        window.request_model(spec, device, precision, args.weights)
        if demo is not None and spec != str(demo) and not args.model:
            def fall_back(_notice) -> None:  # the remembered model is gone: open on the demo instead
                window.state.model_failed.disconnect(fall_back)
                window.request_model(str(demo), device, precision)

            window.state.model_failed.connect(fall_back)
            window.state.model_loaded.connect(lambda _m: _disconnect(window.state.model_failed, fall_back))
    if args.images:
        window.add_paths(args.images)
    elif demo is not None and spec == str(demo) and not settings.value("recent"):
        window.add_paths([str(p) for p in sample_images()])  # first start: something to look at at once
    if args.compare:
        window.compare.other_name.setEditText(args.compare)
        window.compare.load_other()
    if args.tab:
        window.show_tab(args.tab)
    if args.screenshot:
        screenshot_when_idle(window, args.screenshot)
    return window


if __name__ == "__main__":
    raise SystemExit(main())
