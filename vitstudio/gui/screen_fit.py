"""A window fits its screen: the first window and a restored one (saved on a bigger screen, or on one gone since)
are shrunk and moved into the screen's available geometry (the desktop's panels left out), so the status bar and
its error button are never below the screen's edge. A geometry saved on another screen (or with no screen recorded)
also grows, up to the first window's size (`DESIGN_SIZE`) where the screen has room: below it the tabs scroll, and a
size chosen on another screen says nothing about this one. Before the window is shown its frame (title bar,
borders) is not known yet: `FRAME_GUESS` is kept free for it."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

FRAME_GUESS = (8, 40)  # width, height of a typical title bar and borders
DESIGN_SIZE = (1280, 820)  # the first window's size: what the tabs are laid out for


def screen_size(window: QWidget) -> str:
    """The available size of the screen the window is on, as 'WxH' (what a saved geometry is kept with)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    room = screen.availableGeometry() if screen is not None else None
    return f"{room.width()}x{room.height()}" if room is not None else ""


def fit_to_screen(window: QWidget, grow: bool = False) -> None:
    """Shrink and move the window into its screen's available geometry; with `grow` (a geometry saved on another
    screen) also grow it to `DESIGN_SIZE` or the room there is, whichever is smaller."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return
    room = screen.availableGeometry()
    frame, inner = window.frameGeometry(), window.geometry()
    extra_w, extra_h = frame.width() - inner.width(), frame.height() - inner.height()
    if not window.isVisible() and (extra_w, extra_h) == (0, 0):
        extra_w, extra_h = FRAME_GUESS
    want_w, want_h = (max(window.width(), DESIGN_SIZE[0]), max(window.height(), DESIGN_SIZE[1])) if grow else \
        (window.width(), window.height())
    width = min(want_w, room.width() - extra_w)
    height = min(want_h, room.height() - extra_h)
    if (width, height) != (window.width(), window.height()):
        window.resize(max(width, window.minimumWidth()), max(height, window.minimumHeight()))
    x = min(max(frame.x(), room.left()), room.left() + room.width() - window.width() - extra_w)
    y = min(max(frame.y(), room.top()), room.top() + room.height() - window.height() - extra_h)
    if (x, y) != (frame.x(), frame.y()):
        window.move(max(x, room.left()), max(y, room.top()))


SHORT_SCREEN_PX = 900  # available height under which the Log starts as a tab behind the Model card


def fold_log_on_a_short_screen(window) -> None:
    """On a short screen (a 1280×720 laptop, a projector) the Log along the bottom took ~110 px from every tab: it
    starts as a tab behind the Model card instead, one click away (errors wait in the status bar, whose button
    brings the Log to the front). The first window only: after a restart the user's own arrangement is restored."""
    from PySide6.QtWidgets import QDockWidget

    screen = window.screen() or QGuiApplication.primaryScreen()
    card, log = window.findChild(QDockWidget, "model_card_dock"), window.findChild(QDockWidget, "log_dock")
    if screen is None or card is None or log is None or screen.availableGeometry().height() >= SHORT_SCREEN_PX:
        return
    window.tabifyDockWidget(card, log)
    card.raise_()
