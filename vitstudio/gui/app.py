"""GUI entry point: `python main.py [IMAGES...] [--model NAME_OR_PATH] [--weights FILE] [--screenshot PNG]`."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from .tab_names import TABS

SCREENSHOT_SIZE = (1280, 720)  # `--screenshot` on the offscreen platform: the screen the app is designed for


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
    ap.add_argument("--tab", choices=[name for name, _title in TABS], metavar="TAB",
                    help=f"open on this tab: {', '.join(name for name, _title in TABS)}")
    ap.add_argument("--screenshot", metavar="PNG", help="render the window once everything requested has "
                    "finished, save it, and exit")
    return ap.parse_args(argv)


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
    from .startup import FirstPaintProbe, import_heavy, probing

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("ViT Studio")
    app.setOrganizationName("ViT Studio")
    crash_log = CrashLog()
    crash_log.begin()
    app.aboutToQuit.connect(crash_log.end)
    window = _open_frame(args)  # Qt only: menus, model bar, image strip, tabs; torch and timm load behind it
    crash_log.tell(window)
    if probing():
        FirstPaintProbe(window, "main")
    window.show()

    def attach(_result=None) -> None:
        workers.freeze_long_lived()  # the libraries are imported, no model is loaded yet
        window.attach_panels()
        if probing():  # a screenshot run quits once it has taken its picture
            FirstPaintProbe(window.tabs.currentWidget(), "panels", quit_after=not args.screenshot)
        _after_panels(window, args)

    def failed(exc: BaseException) -> None:
        window.show_warning(f"Could not load PyTorch/timm: {workers.describe(exc)}")

    workers.start_job("Loading libraries", import_heavy, on_result=attach, on_error=failed, kind=workers.LONG)
    return app.exec()


def _build_main_window(args):
    """The window main.py ends up with, built in one go (the soak benchmark drives it): the frame, its panels and
    what the command line asks for."""
    from . import workers
    from .startup import import_heavy

    window = _open_frame(args)
    import_heavy(None)
    workers.freeze_long_lived()  # as main() does once the libraries are in: full collections skip them
    window.attach_panels()
    _after_panels(window, args)
    return window


def _model_spec(args, settings) -> str:
    """The model to open on: the command line's, the one used last time, else the bundled demo."""
    from vitstudio.app.model_files import bundled_demo

    demo = bundled_demo()
    return args.model or settings.value("model", "") or (str(demo) if demo else "")


def _open_frame(args):
    """The main window's frame with the images the command line or a first start asks for (they open into the
    strip at once and are classified once a model has loaded), on the tab asked for."""
    from PySide6.QtWidgets import QApplication

    from vitstudio.app.model_files import bundled_demo, sample_images

    from .app_settings import list_value
    from .main_window import MainWindow

    window = MainWindow(panels=False)
    window.remembers_geometry = not args.screenshot  # the picture's size is not the user's window
    if args.screenshot and QApplication.platformName() == "offscreen":  # no real screen to fit (Qt's is 800×800):
        window.resize(*SCREENSHOT_SIZE)  # the picture is of the size the app is designed for
    demo = bundled_demo()
    kept = [p for p in list_value(window.settings, "strip") if os.path.isfile(p)]  # the last session's strip
    if args.images:
        window.add_paths(args.images)
    elif kept:  # what was open at the last close opens again
        window.add_paths(kept)
    elif demo is not None and _model_spec(args, window.settings) == str(demo) and not window.settings.value("recent"):
        window.add_paths([str(p) for p in sample_images()])  # first start: something to look at at once
    if args.tab:
        window.show_tab(args.tab)
    return window


def _after_panels(window, args) -> None:
    """What needs the panels: the model (on the device asked for or saved, known now that torch can list the GPUs),
    the second model of Compare, the screenshot."""
    from vitstudio.app.model_files import bundled_demo

    from .screenshot import screenshot_when_idle

    settings = window.settings
    demo = bundled_demo()
    spec = _model_spec(args, settings)
    device = args.device or settings.value("device", "auto")
    precision = args.precision or settings.value("precision", "auto")
    if spec and window.state.view.requested is None:  # a model the user asked for while torch loaded wins
        window.request_model(spec, device, precision, args.weights)
        if demo is not None and spec != str(demo) and not args.model:
            state = window.state

            def fall_back(_notice) -> None:  # the remembered model is gone: open on the demo instead
                settle()
                window.request_model(str(demo), device, precision)

            def settle(_model=None) -> None:  # either outcome ends the watch (it runs once: both go here)
                state.model_failed.disconnect(fall_back)
                state.model_loaded.disconnect(settle)

            state.model_failed.connect(fall_back)
            state.model_loaded.connect(settle)
    if args.compare:
        window.compare.other_name.setEditText(args.compare)
        window.compare.load_other()
    if args.screenshot:
        screenshot_when_idle(window, args.screenshot)


if __name__ == "__main__":
    raise SystemExit(main())
