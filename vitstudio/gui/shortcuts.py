"""The Go and Training menus: a shortcut for every tab (Ctrl+1, Ctrl+2, … in tab order), the next and previous image,
and Start / Pause / Cancel of a training run. Help → Keyboard shortcuts lists them from these QActions.

The training actions press the Training panel's own buttons, so they do exactly what a click does and nothing a
disabled button would refuse; pressed while the button is disabled, they say why in the status bar instead."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QLineEdit

NEXT_IMAGE, PREVIOUS_IMAGE = "Ctrl+Down", "Ctrl+Up"
# F5 runs, Shift+F5 stops (as in most IDEs); F6 pauses. None of them is taken by Qt's standard keys.
TRAINING_KEYS = (("Start training", "F5", "start_button"), ("Pause / continue training", "F6", "pause_button"),
                 ("Cancel training", "Shift+F5", "cancel_button"))
# keys that are not QActions of this window (widgets handle them), listed in Help → Keyboard shortcuts too
WIDGET_KEYS = (("Next / previous image (the image strip focused)", "Down / Up"),
               ("Several images in the strip", "Shift+click, Ctrl+click"),
               ("Select a patch (token map, similarity)", "click on the image"),
               ("Select a head", "click its map in the head grid"),
               ("Label the selected images with the Labels tab's class N (Folder table focused)", "1 … 9"))


def build_shortcut_menus(window) -> list[QAction]:
    """Adds the Go and Training menus to the window's menu bar (before Help); returns their actions."""
    bar = window.menuBar()
    help_menu = next((a for a in bar.actions() if a.text().replace("&", "") == "Help"), None)
    go_menu, training_menu = window.menuBar().addMenu("&Go"), window.menuBar().addMenu("&Training")
    if help_menu is not None:  # Help stays the last menu
        bar.insertMenu(help_menu, go_menu)
        bar.insertMenu(help_menu, training_menu)
    actions = []
    for index in range(min(window.tabs.count(), 9)):  # Ctrl+1…Ctrl+9: one digit per tab, in tab order
        title = window.tabs.tabText(index).replace("&", "")
        actions.append(_action(window, go_menu, f"{title} tab", f"Ctrl+{index + 1}",
                               lambda _checked=False, i=index: window.tabs.setCurrentIndex(i)))
    go_menu.addSeparator()
    actions.append(_action(window, go_menu, "Next image", NEXT_IMAGE, lambda: step_image(window, 1)))
    actions.append(_action(window, go_menu, "Previous image", PREVIOUS_IMAGE, lambda: step_image(window, -1)))
    for text, keys, button in TRAINING_KEYS:
        actions.append(_action(window, training_menu, text, keys,
                               lambda _checked=False, b=button, t=text: press_training_button(window, b, t)))
    training_actions = actions[-len(TRAINING_KEYS):]
    # the open menu greys what its buttons would refuse (Pause and Cancel with nothing training); closed, the keys
    # stay live and say why instead of doing nothing
    training_menu.aboutToShow.connect(lambda: _follow_buttons(window, training_actions, True))
    training_menu.aboutToHide.connect(lambda: _follow_buttons(window, training_actions, False))
    return actions


def _follow_buttons(window, actions: list[QAction], shown: bool) -> None:
    for action, (_text, _keys, name) in zip(actions, TRAINING_KEYS):
        button = getattr(window.training.controls, name, None) if window.training is not None else None
        action.setEnabled(not shown or (button is not None and button.isEnabled()))


# the File menu's keys that a line edit also claims; standard editing keys (copy, paste, undo…) stay the field's
FIELD_CLAIMED = ("Ctrl+E", "Ctrl+Shift+E")


def keep_window_keys(window, actions) -> None:
    """The window's shortcuts among `actions` (and the File menu's Ctrl+E, Ctrl+Shift+E) fire whatever has focus."""
    keys = [a for a in window.findChildren(QAction) if a.shortcut().toString() in FIELD_CLAIMED]
    window.window_keys = WindowKeysFirst(window, [*actions, *keys])


def _action(window, menu, text: str, keys: str, slot) -> QAction:
    action = QAction(text, window)
    action.setShortcut(QKeySequence(keys))
    action.triggered.connect(slot)
    menu.addAction(action)
    return action


def step_image(window, step: int) -> None:
    """Select the next (step 1) or previous (-1) readable image of the strip; at either end the selection stays
    and the status bar says so (wrapping round took a walk past the last image back to the first unnoticed)."""
    images = [e for e in window.state.images if e.error is None]
    if not images:
        window.state.message.emit("info", "No images yet: open some with File → Open images… (Ctrl+O).")
        return
    current = window.state.selected
    if current not in images:
        window.state.select(images[0 if step > 0 else -1])
        return
    index = images.index(current) + step
    if not 0 <= index < len(images):
        end = "last" if step > 0 else "first"
        window.state.message.emit("info", f"This is the {end} image ({images.index(current) + 1} of {len(images)}).")
        return
    window.state.select(images[index])


def press_training_button(window, name: str, text: str) -> None:
    """Click the Training panel's button `name` as the user would; a disabled one says why instead."""
    if window.training is None:
        window.state.message.emit("info", f"{text}: not yet (PyTorch and timm are loading).")
        return
    button = getattr(window.training.controls, name)
    if button.isEnabled():
        window.show_tab("training")
        if name != "cancel_button" or _cancel_confirmed(window):
            button.click()
        return
    reason = button.toolTip() or ("no run is in progress" if name != "start_button" else "a run is in progress")
    window.state.message.emit("info", f"{text}: not now ({reason}).")


def _cancel_confirmed(window) -> bool:
    """Shift+F5 sits next to F5: a key pressed by mistake must not end an hour's run. The button is aimed at, so
    it cancels at once; the key asks (No is the default, so Enter keeps training)."""
    from PySide6.QtWidgets import QMessageBox

    if not window.training.running:
        return True
    run = window.training.active_run.name if window.training.active_run is not None else "the run"
    answer = QMessageBox.question(
        window, "Cancel training?", f"Cancel {run}? The epoch in progress is lost; the last finished epoch is "
        "kept, and Resume run in History continues from there.", QMessageBox.Yes | QMessageBox.No, QMessageBox.No)
    return answer == QMessageBox.Yes


def shortcut_rows(window) -> list[tuple[str, str]]:
    """(what, keys) for every QAction of the window with a shortcut (menus and widgets' own, e.g. the strip's
    Delete), then the keys widgets handle themselves. Read from the live actions, so the list cannot drift."""
    from PySide6.QtWidgets import QMenu, QWidget

    seen, rows = set(), []
    owners = [*window.menuBar().findChildren(QMenu), *window.findChildren(QWidget)]
    for owner in owners:
        for action in owner.actions():
            keys = action.shortcut().toString(QKeySequence.NativeText)
            name = action.text().replace("&", "")
            if keys and (name, keys) not in seen:
                seen.add((name, keys))
                rows.append((name, keys))
    return rows + list(WIDGET_KEYS)


class WindowKeysFirst(QObject):
    """The window's own shortcuts win over a line edit's: a spin box or a text field claims Ctrl+E (its Emacs "end
    of line" on X11), so Export view did nothing while the cursor was in a field. ShortcutOverride goes to the
    focus widget, so the filter goes on each field of this window as it takes focus (keys only, for the window's
    actions that are not text editing). Not on the application: a filter there is a Python call for every event
    of every object, which made building the window three times slower and taxed every event after."""

    def __init__(self, window, actions) -> None:
        super().__init__(window)
        self.window = window
        self.keys = {a.shortcut().toString() for a in actions if not a.shortcut().isEmpty()}
        app = QApplication.instance()
        app.focusChanged.connect(self._watch_field)  # a method of a child of the window: gone with it
        self._watch_field(None, app.focusWidget())

    def _watch_field(self, _old, new) -> None:
        if isinstance(new, QLineEdit | QAbstractSpinBox) and new.window() is self.window:
            new.installEventFilter(self)  # once per field: installing again only moves it first

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() != QEvent.ShortcutOverride or not isinstance(obj, QLineEdit | QAbstractSpinBox):
            return False
        if obj.window() is not self.window or QKeySequence(event.keyCombination()).toString() not in self.keys:
            return False
        event.ignore()  # not overridden: the window's shortcut fires
        return True
