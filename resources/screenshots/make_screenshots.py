"""1280×720 screenshots of every tab, offscreen: the demo model loaded, the sample images open, 120 sklearn digits
in the Folder tab (and each of its pages: gallery and lasso, label review, duplicates, counts, paint, concepts,
layers), a finished tiny run (coloured squares, 8 epochs) on the Training tab with each of its views, Compare → Match
and a Teach project.

    .venv/bin/python resources/screenshots/make_screenshots.py [OUT_DIR]

Everything the app writes goes to a temporary folder; the PNGs get a 256-colour palette (small files)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _isolate(tmp: Path) -> None:
    """Models, caches, settings and the app's data in `tmp`: the user's own are never read or written."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    for var in ("VITSTUDIO_DATA_DIR", "VITSTUDIO_MODELS_DIR", "VITSTUDIO_CACHE_DIR", "XDG_DATA_HOME",
                "XDG_CACHE_HOME"):
        os.environ[var] = str(tmp / var)


def _digits_folder(folder: Path, per_class: int = 12) -> Path:
    """Digits as the demo model was trained on them (`render_digits`: dark ink on white), 12 per class."""
    from vitstudio.core.models.demo import render_digits

    render_digits(folder)
    for digit in folder.iterdir():
        for extra in sorted(digit.iterdir())[per_class:]:
            extra.unlink()
    return folder


def main(out: Path) -> None:
    tmp = Path(tempfile.mkdtemp())
    _isolate(tmp)
    sys.path.insert(0, str(ROOT))
    from PIL import Image
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication([])
    QSettings.setPath(QSettings.NativeFormat, QSettings.UserScope, str(tmp / "settings"))
    from tests.core.synthetic_data import make_dataset
    from vitstudio.core.models.demo import bundled_demo, sample_images
    from vitstudio.gui import workers
    from vitstudio.gui.main_window import MainWindow

    def idle(at_least: float = 0.5, timeout: float = 180, until=None) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            app.processEvents()
            time.sleep(0.05)
            if (not workers.running_jobs() and time.monotonic() - started > at_least
                    and (until is None or until())):
                break

    def save(name: str) -> None:
        path = out / f"{name}.png"
        window.grab().save(str(path))
        Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)

    out.mkdir(parents=True, exist_ok=True)
    window = MainWindow()
    window.resize(1280, 720)
    window.show()
    window.request_model(str(bundled_demo()), "cpu", "fp32")
    window.add_paths([str(p) for p in sample_images()])
    idle(2)
    window.folder.open_folder(str(_digits_folder(tmp / "digits")))
    idle(3)
    panel = window.training
    panel.set_dataset(str(make_dataset(tmp / "colours", per_class=16)))
    idle(1, until=lambda: panel.dataset_actions.scan is not None)
    panel.dataset.base_model.setEditText("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3")
    panel.form.preset.setCurrentText("scratch")
    panel.form.inputs["epochs"].setValue(8)
    panel.form.inputs["batch_size"].setValue(8)
    panel.start()
    idle(2, until=lambda: panel.job is not None and panel.job.done and panel.results.report is not None)
    for i in range(window.tabs.count()):
        window.tabs.setCurrentIndex(i)
        idle(1)
        if window.tabs.currentWidget() is window.play:  # playing: moving digits with rollout over them
            from tests.core.play_video import moving_digits_video

            window.play.method.setCurrentIndex(window.play.method.findData("rollout"))
            window.play.play(str(moving_digits_video(tmp / "digits.avi", frames=240)))
            idle(4)
        if window.tabs.currentWidget() is window.teach:  # taken with a project open (_teach)
            continue
        if window.tabs.currentWidget() is not panel:
            save(f"{i + 1}-{window.tabs.tabText(i).lower().replace(' ', '-')}")
            continue
        for j in range(panel.right.count()):  # the Training tab: once per view of the run
            panel.right.setCurrentIndex(j)
            idle(0.5)
            save(f"{i + 1}{chr(97 + j)}-training-{panel.right.tabText(j).lower()}")
    _layer_views(window, idle, save)
    _lora_plan(window, idle, save, tmp / "digits")
    _concepts(window, idle, save, tmp / "digits")
    _folder_pages(window, idle, save)
    _match(window, idle, save)
    _teach(window, idle, save, tmp)
    print(f"window minimum {window.minimumSizeHint().width()}×{window.minimumSizeHint().height()}; saved in {out}")
    window.close()
    workers.shutdown(5000)


def _layer_views(window, idle, save) -> None:
    """Layer by layer: the logit lens in the Attention tab, the Folder tab's probes per block, and CKA between the
    demo model and an untrained copy of its architecture (where training changed what) in the Compare tab."""
    window.tabs.setCurrentWidget(window.attention)
    window.attention.view_state.update(method="logit-lens", layer=2)
    idle(1)
    save("9a-logit-lens")
    window.tabs.setCurrentWidget(window.folder)
    window.folder.side.setCurrentWidget(window.folder.side.page("layers"))
    window.folder.side.page("layers").start()
    idle(1, until=lambda: window.folder.side.page("layers").result is not None)
    save("9b-folder-layers")
    compare = window.compare
    window.tabs.setCurrentWidget(compare)
    compare.pages.setCurrentWidget(compare.layers)
    compare.other_name.setEditText("custom:img=32,patch=4,width=64,depth=4,heads=4,classes=10")  # untrained
    compare.load_other()
    idle(1, until=lambda: compare.other is not None)
    compare.layers.start()
    idle(1, until=lambda: compare.layers.result is not None)
    compare.layers.select_cell(3, 3)
    idle(1)
    save("9c-compare-layers")


def _lora_plan(window, idle, save, digits: Path) -> None:
    """The Training form set for a LoRA run of the demo model on the digits, with its memory plan."""
    from vitstudio.core.models.demo import bundled_demo

    panel = window.training
    window.tabs.setCurrentWidget(panel)
    panel.set_dataset(str(digits))
    idle(1, until=lambda: panel.dataset_actions.scan is not None)
    panel.dataset.base_model.setEditText(str(bundled_demo()))
    panel.form.preset.setCurrentText("lora")
    panel.form.advanced.setChecked(True)
    panel.form.inputs["batch_size"].setValue(64)
    idle(2, until=lambda: getattr(panel.memory_plan, "planned", None) is not None
         and panel.memory_plan.planned.plan.batch_size == 64)
    area = panel.form.parentWidget()
    while not hasattr(area, "ensureWidgetVisible"):  # the form's scroll area: show the adapter settings
        area = area.parentWidget()
    area.ensureWidgetVisible(panel.form.controls["lora_targets"].widget, 0, 10)
    idle(0.5)
    save("7f-training-lora-plan")


def _concepts(window, idle, save, digits: Path) -> None:
    """The Folder tab's Concepts side tab: concepts of the demo model learned on the digits, one chosen (its top
    patches), then the same concept on the selected image."""
    panel = window.folder
    window.tabs.setCurrentWidget(panel)
    panel.open_folder(str(digits))
    idle(2)
    tab = panel.side.page("concepts")
    panel.side.setCurrentWidget(tab)
    tab.settings_state.update(size=256, k=8, epochs=20)
    tab.start()
    idle(2, until=lambda: tab.concepts is not None)
    row = max(tab.concepts.stats["concepts"], key=lambda c: c["images"] * (c["images"] < 0.5 * len(tab.concepts
                                                                                                    .stats["map"])))
    tab.select_concept(row["index"])
    idle(1.5)
    save("6b-folder-concepts")
    window.state.select(window.state.images[0])
    tab.show_page(tab.on_image)
    idle(1.5)
    save("6c-folder-concepts-on-image")


def _folder_pages(window, idle, save) -> None:
    """The Folder tab's other views: the gallery with a lasso drawn on the map, the label review, the duplicates,
    the counts per class and a painted mask on the Paint page."""
    import numpy as np

    from tests.gui.helpers import drag_on_map

    panel = window.folder
    window.tabs.setCurrentWidget(panel)
    panel.side.setCurrentWidget(panel.side.page("map"))
    panel.view_state.gallery = True
    coords = panel.folder_model.coords
    centre, spread = coords.mean(0), coords.std(0)
    angles = np.linspace(0, 2 * np.pi, 60)
    outline = centre + np.stack([np.cos(angles), np.sin(angles)], 1) * spread  # an ellipse of one deviation
    panel.side.page("map").map.set_lasso(True)
    idle(0.5)
    drag_on_map(panel.side.page("map").map, outline.tolist())  # drawn as the mouse draws: the Folder model selects
    idle(1.5)
    save("6d-folder-gallery-lasso")
    panel.side.page("map").map.set_lasso(False)
    panel.folder_model.reset_filters()
    panel.view_state.gallery = False
    _plant_copies(Path(panel.folder))  # an exact copy and a near one: something for the Duplicates page to find
    panel.open_folder(panel.folder)
    idle(2)
    panel.start_review()
    idle(2, until=lambda: panel.folder_model.report is not None)
    save("6e-folder-label-review")
    panel.side.setCurrentWidget(panel.side.page("duplicates"))
    idle(0.5)
    save("6f-folder-duplicates")
    pages = {page.page_id: page for page in panel.side.pages}
    panel.side.setCurrentWidget(pages["counts"])
    idle(0.5)
    save("6g-folder-counts")
    paint = window.app.pages["paint"]
    panel.side.setCurrentWidget(pages["paint"])
    panel.folder_model.select(0)
    idle(1, until=lambda: paint.picture is not None)
    for brush, stroke in ((1, [(10, 8), (16, 14), (20, 24)]), (0, [(2, 2), (28, 2), (28, 28), (2, 28)])):
        paint.paint.state.update(brush_class=brush, radius=3 if brush else 2)
        paint.press(*stroke[0])
        for point in stroke[1:]:
            paint.drag(*point)
        paint.release()
    idle(1.5)
    save("6h-folder-paint")


def _plant_copies(folder: Path) -> None:
    """Class 3's first image copied as it is into class 8, and its second brightened into class 5."""
    import shutil

    from PIL import Image, ImageEnhance

    threes = sorted((folder / "3").glob("*.png"))
    shutil.copy(threes[0], folder / "8" / f"copy-of-{threes[0].name}")
    ImageEnhance.Brightness(Image.open(threes[1]).convert("RGB")).enhance(1.1).save(folder / "5" / "near-3.png")


def _match(window, idle, save) -> None:
    """Compare → Match: a point of one sample image found in another."""
    compare = window.compare
    window.tabs.setCurrentWidget(compare)
    compare.pages.setCurrentWidget(compare.match)
    window.state.select(window.state.images[0])
    compare.match.model.set_b(window.state.images[1].path)
    idle(1.5, until=lambda: compare.match.model.features is not None)
    compare.match.model.click(15, 12)  # a point of A, in its pixels
    idle(1.5)
    save("5b-compare-match")


def _teach(window, idle, save, tmp: Path) -> None:
    """Teach: a project of three digit classes from files, the head refitted, a sample's bars on the cards."""
    from vitstudio.core.models.demo import render_digits

    teach = window.teach
    window.tabs.setCurrentWidget(teach)
    digits = render_digits(tmp / "teach-digits", per_class=6)
    teach.open_project(str(tmp / "teach-project"))
    for name in ("3", "5", "8"):
        teach._act(teach.teach.add_class, name)
        teach._act(teach.teach.add_files, name, sorted(str(p) for p in (digits / name).glob("*.png")))
    idle(2, until=lambda: teach.jobs.current("refit") is not None)
    save("10-teach")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
