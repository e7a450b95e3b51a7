"""The window's own settings (last model, device and precision, geometry, recent files, last folder, a CLIP-style
model's classes): an INI file in the app's data folder (`core.files.data_dir`), so `VITSTUDIO_DATA_DIR` isolates
them as it isolates the journals, exclusions and session memory. Qt's default per-user file (`ViT Studio/ViT
Studio.conf` in the desktop's config folder) was shared by every instance: a test run, a second window or a
screenshot overwrote the user's last model and window geometry.

The file is read and written through QSettings (its INI format), one object per use: each reads the file afresh,
so two windows of one data folder see each other's last writes."""

from __future__ import annotations

from PySide6.QtCore import QSettings

from vitstudio.core import files

from .screen_fit import DESIGN_SIZE, fit_to_screen, fold_log_on_a_short_screen, screen_size

FILE_NAME = "settings.ini"


def app_settings() -> QSettings:
    return QSettings(str(files.data_dir() / FILE_NAME), QSettings.IniFormat)


def list_value(settings: QSettings, key: str) -> list:
    """A list setting as a list: INI keeps a one-item list as a plain string, which reads back as one."""
    value = settings.value(key, [])
    return [value] if isinstance(value, str) else list(value or [])


def restore_window(window, settings: QSettings) -> None:
    """The model bar's device and precision, and the window's geometry, as last saved; the window fitted to the
    screen it is on now (a geometry saved on a bigger screen, or the first window on a 1280×720 one)."""
    view, fields = window.state.view, window.state.view.fields()
    device, precision = settings.value("device", "auto"), settings.value("precision", "auto")
    # a device saved on another machine (or a GPU gone since) falls back to auto instead of refusing to start
    view.update(device=device if device in fields["device"].choices else "auto",
                precision=precision if precision in fields["precision"].choices else "auto")
    grow = False
    if settings.value("geometry"):
        window.restoreGeometry(settings.value("geometry"))
        window.restoreState(settings.value("window_state"))
        grow = settings.value("geometry_screen", "") != screen_size(window)  # saved on another screen (or unknown)
    else:
        window.resize(*DESIGN_SIZE)
        fold_log_on_a_short_screen(window)
    fit_to_screen(window, grow)


def save_window(window, settings: QSettings) -> None:
    """The window's geometry and docks, with the screen they were saved on (a restore on another screen fits them to
    it); not for a window that asks not to (`window.remembers_geometry` False: a `--screenshot` run's window, sized
    for the picture, not by the user)."""
    if not getattr(window, "remembers_geometry", True):
        return
    settings.setValue("geometry", window.saveGeometry())
    settings.setValue("window_state", window.saveState())
    settings.setValue("geometry_screen", screen_size(window))
