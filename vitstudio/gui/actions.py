"""Menus and their actions: open, paste, recent files, export of the current view and of its data."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget, QMenu

from vitstudio.app.analyses import write_result
from vitstudio.gui import file_dialogs

from .app_settings import list_value
from .edit_menu import build_edit_menu
from .model_export_dialog import choose_model_export
from .shortcuts import build_shortcut_menus, keep_window_keys, shortcut_rows

IMAGE_FILTER = "Images (*.jpg *.jpeg *.png *.bmp *.gif *.webp *.tif *.tiff);;All files (*)"


class RecentMenu(QMenu):
    def __init__(self, window) -> None:
        super().__init__("Open &recent", window)
        self.window = window
        self.refresh()

    def refresh(self) -> None:
        self.clear()
        recent = list_value(self.window.settings, "recent")
        for entry in recent:  # a file, a folder, or the files of one multi-open joined by newlines
            paths = entry.split("\n")
            action = self.addAction(paths[0] if len(paths) == 1 else
                                    f"{len(paths)} files: {', '.join(Path(p).name for p in paths[:3])}…")
            action.setToolTip(entry)
            if len(paths) == 1 and Path(paths[0]).is_dir():  # a folder: the strip and the Folder tab, as it opened
                action.triggered.connect(lambda _checked=False, p=paths[0]: self.window.open_folder(p))
            else:
                action.triggered.connect(lambda _checked=False, p=paths: self.window.add_paths(p))
        self.setEnabled(bool(recent))


def build_menus(window) -> RecentMenu:
    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    _add(window, file_menu, "Open images…", lambda: open_images(window), QKeySequence.Open)
    _add(window, file_menu, "Open folder…", lambda: open_folder(window), "Ctrl+Shift+O")
    recent = RecentMenu(window)
    file_menu.addMenu(recent)
    _add(window, file_menu, "Paste image", lambda: paste_image(window), QKeySequence.Paste)
    file_menu.addSeparator()
    _add(window, file_menu, "Export view as PNG…", lambda: export_view(window), "Ctrl+E")
    _add(window, file_menu, "Export data of this view…", lambda: export_data(window), "Ctrl+Shift+E")
    _add(window, file_menu, "Export model…", lambda: export_model(window))
    file_menu.addSeparator()
    _add(window, file_menu, "Where folder work runs…", lambda: folder_work(window))
    file_menu.addSeparator()
    _add(window, file_menu, "Quit", window.close, QKeySequence.Quit)
    build_edit_menu(window)  # Edit → Undo / Redo of the Folder tab's sorts, moves and exclusions
    view_menu = bar.addMenu("&View")
    for dock in window.findChildren(QDockWidget):
        view_menu.addAction(dock.toggleViewAction())
    help_menu = bar.addMenu("&Help")
    for topic in HELP_TOPICS:
        _add(window, help_menu, topic, lambda _checked=False, t=topic: show_help(window, t),
             QKeySequence.HelpContents if topic == "Keyboard shortcuts" else None)
    keep_window_keys(window, build_shortcut_menus(window))
    return recent


def folder_work(window) -> None:
    from .folder.folder_work_dialog import FolderWorkDialog

    FolderWorkDialog(window.app.folder_work, window.settings, window).open()


def _add(window, menu, text, slot, shortcut=None) -> QAction:
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcut(shortcut)
    action.triggered.connect(slot)
    menu.addAction(action)
    return action


def open_images(window) -> None:
    files = file_dialogs.open_files(window, "Open images", IMAGE_FILTER)
    if files:
        window.add_paths(files)


def open_folder(window) -> None:
    folder = file_dialogs.choose_folder(window, "Open folder")
    if folder:
        window.open_folder(folder)  # the strip and the Folder tab: one Open folder


def paste_image(window) -> None:
    clipboard = QApplication.clipboard()
    if clipboard.mimeData().hasUrls():
        window.add_paths([u.toLocalFile() for u in clipboard.mimeData().urls() if u.isLocalFile()])
    elif not clipboard.image().isNull():
        window._add_qimage(clipboard.image(), "pasted image")
    else:
        window.state.message.emit("warning", "The clipboard holds no image.")


def export_view(window, path: str | None = None) -> bool:
    """The current tab, rendered as it looks on screen."""
    if path is None:
        path = file_dialogs.save_file(window, "Export view as PNG", "view.png", "PNG image (*.png)")
    if not path:
        return False
    ok = window.tabs.currentWidget().grab().save(path)
    if ok:
        window.show_notice(f"Saved {path}", str(Path(path).absolute().parent))
    else:
        window.state.report(OSError(f"Could not save {path}: is the folder writable and the name a .png?"))
    return ok


def export_data(window, path: str | None = None) -> bool:
    """The array behind the current view, with the parameters that produced it."""
    export = getattr(window.tabs.currentWidget(), "export_data", None)  # None while the panels load
    data = export() if export is not None else None
    if data is None:
        window.state.message.emit("warning", "Nothing to export in this view yet.")
        return False
    name, array, params = data
    if path is None:
        path = file_dialogs.save_file(window, "Export data", f"{name}.npy",
                                      "NumPy array (*.npy);;JSON (*.json);;CSV (*.csv)")
    if not path:
        return False
    try:
        files = write_result(path, array, params)
    except (ValueError, OSError) as exc:
        window.state.report(exc, "Export failed")
        return False
    window.show_notice("Saved " + ", ".join(str(f) for f in files), str(Path(files[0]).absolute().parent))
    return True


HELP_TOPICS = ("Keyboard shortcuts", "Where models live", "About ViT Studio")


def help_text(window, topic: str) -> str:
    """The text of a Help menu entry (HTML), from the live window: its shortcuts, folders and versions."""
    if topic == "Keyboard shortcuts":
        rows = shortcut_rows(window)
        return "<table>" + "".join(f"<tr><td>{name}</td><td>&nbsp;&nbsp;<b>{keys}</b></td></tr>"
                                   for name, keys in rows) + "</table>"
    if topic == "Where models live":
        from huggingface_hub import constants

        from vitstudio.app.model_files import models_dir
        from vitstudio.core.files import cache_dir, data_dir, extra_model_dirs

        also = "".join(f"<br>Also listed (read-only): {folder}" for folder in extra_model_dirs())
        return (f"<p><b>Your models and fine-tuning runs:</b> {models_dir()}<br>(a folder per model: timm's "
                f"config.json + model.safetensors; set VITSTUDIO_MODELS_DIR to move it){also}</p>"
                f"<p><b>Settings, undo journals, exclusions:</b> {data_dir()} (VITSTUDIO_DATA_DIR)<br>"
                f"<b>Caches</b> (safe to delete): {cache_dir()} (VITSTUDIO_CACHE_DIR)</p>"
                f"<p><b>Downloaded weights:</b> the Hugging Face cache, {constants.HF_HUB_CACHE}</p>"
                "<p>Models marked ● in the model list load offline; ○ need a network once; HF_HUB_OFFLINE=1 "
                "never tries the network.</p>")
    import html

    import timm
    import torch

    from vitstudio._version import __version__
    from vitstudio.core.files import app_folders

    folders = "<br>".join(f"<b>{what}:</b> {html.escape(str(where))} ({moved_by})" for what, where, moved_by
                          in app_folders())
    return (f"<p><b>ViT Studio {__version__}</b>: predict with, look inside and fine-tune Vision "
            f"Transformers.</p><p>torch {torch.__version__} · timm {timm.__version__}</p><p>{folders}</p>"
            "<p>Rollout: Abnar &amp; Zuidema 2020. Gradient rollout: Chefer et al. 2021. Attention distance: "
            "Dosovitskiy et al. 2021, Fig. 7.</p>")


def show_help(window, topic: str):
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(QMessageBox.Information, topic, help_text(window, topic), QMessageBox.Ok, window)
    box.setModal(False)
    box.setAttribute(Qt.WA_DeleteOnClose)
    box.show()
    return box


def export_model(window, fmt: str | None = None, path: str | None = None, spec: str | None = None):
    """The current model (or the run `spec`) as ONNX, with labels and preprocessing in its metadata, or in
    upstream's seed format; written by a worker, reported in the status bar with a link to its folder. Returns the
    job, or None."""
    from vitstudio.app.model_files import load_model

    from . import workers

    if spec is None and window.state.model is None:
        window.state.message.emit("warning", "Load a model first.")
        return None
    if fmt is None or path is None:
        fmt, path = choose_model_export(window)
        if not path:
            return None
    current = window.state.model

    def run(cancel):
        loaded = load_model(spec, device="cpu") if spec is not None else current
        if fmt == "seed":
            from vitstudio.app.model_files import export_seed

            result = export_seed(loaded, path)
            return (f"Saved {result.folder} (model.pth + class_indices.json): how to load it with upstream's code is "
                    f"in its README.txt" + (" (its preprocessing differs: see there)." if result.notes else "."),
                    str(result.folder))
        from vitstudio.app.model_files import export_onnx

        result = export_onnx(loaded, path)
        checked = "" if result.max_abs_diff is None else f", ONNX Runtime matches ({result.max_abs_diff:.1e})"
        return f"Saved {result.path}{checked}", str(Path(result.path).parent)

    return workers.start_job("Exporting model", run, on_result=lambda said: window.show_notice(*said),
                             on_error=window._on_job_error)
