"""The mouse wheel never changes a value the user is not editing.

Scrolling a long form with the wheel used to change whichever spin box, combo box or slider passed under the
pointer (30 epochs silently became 27). This filter lets such an input take the wheel only while it has keyboard
focus (a click or Tab gives it); otherwise the wheel event is ignored, so Qt hands it to the parent and the scroll
area around the form scrolls instead. The inputs also stop taking focus from the wheel (Qt.StrongFocus instead of
Qt.WheelFocus): scrolling past one never selects it.

The filter sits on each input, put there as the application's style polishes it (every widget is polished once,
before it is first shown, whoever makes it). It used to sit on the application, where it was a Python call for every
event of every object: building the main window took three times as long, and every event after paid for it.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QProxyStyle,
    QScrollBar,
    QStyle,
    QStyleFactory,
    QWidget,
)

from .sort_arrow import SortArrowStyle

_GUARDED = (QAbstractSpinBox, QComboBox, QAbstractSlider)
_NAME = "vitstudio_wheel_guard"


def _guarded(obj: QObject) -> bool:
    return isinstance(obj, _GUARDED) and not isinstance(obj, QScrollBar)  # scroll bars are for wheeling


class WheelGuard(QObject):
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Wheel and _guarded(obj) and not obj.hasFocus():
            _pass_to_parents(obj, event)
            return True
        return False


class GuardingStyle(QProxyStyle):
    """The application's own style, unchanged, that hands every spin box, combo box and slider to the guard as it
    polishes it."""

    def __init__(self, base: QStyle, guard: WheelGuard) -> None:
        super().__init__(base)
        self.guard = guard

    def polish(self, target):  # one name for Qt's three overloads: a widget, the application, a palette
        result = super().polish(target)
        if isinstance(target, QWidget) and _guarded(target):
            if target.focusPolicy() == Qt.WheelFocus:
                target.setFocusPolicy(Qt.StrongFocus)
            target.installEventFilter(self.guard)  # once: installing again only moves it first
        return result


def _pass_to_parents(widget: QWidget, event: QWheelEvent) -> None:
    """Offer the event to each parent in turn, in its own coordinates, until one accepts it (what QApplication
    does for an ignored wheel event, which it skips for synthesized ones: done here, both behave alike)."""
    pos = event.position()
    while not widget.isWindow() and widget.parentWidget() is not None:
        pos += widget.pos()
        widget = widget.parentWidget()
        passed = QWheelEvent(pos, event.globalPosition(), event.pixelDelta(), event.angleDelta(), event.buttons(),
                             event.modifiers(), event.phase(), event.inverted(), event.source())
        passed.ignore()
        QApplication.sendEvent(widget, passed)
        if passed.isAccepted():
            event.accept()
            return
    event.ignore()


def install_wheel_guard(app: QApplication | None = None) -> WheelGuard:
    """Install the guard once (a second call returns the one installed): the application's style becomes the same
    style wrapped to guard each input it polishes (setting it polishes the widgets that exist again). The guard is a
    child of the application, so it lives as long as the application does."""
    app = app or QApplication.instance()
    guard = app.findChild(WheelGuard, _NAME)
    if guard is None:
        guard = WheelGuard(app)
        guard.setObjectName(_NAME)
        # a fresh instance of the style in use (a proxy takes ownership of its base; the application owns its own)
        base = QStyleFactory.create(app.style().name()) or QStyleFactory.create("Fusion")
        guard.style = GuardingStyle(SortArrowStyle(base), guard)  # and header arrows drawn as the column reads
        app.setStyle(guard.style)
    return guard
