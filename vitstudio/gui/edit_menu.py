"""Edit → Undo / Redo (Ctrl+Z, Ctrl+Shift+Z) of the app's one undo stack (vitstudio/app/undo.py): the Folder tab's
sorts, label-review moves, exclusions and labels and the Paint page's strokes, in the order they were made, from any
tab. The actions name what they would undo or redo ("Undo Sort 398 images into sorted") and are disabled
when there is nothing to undo or redo. In a text field Ctrl+Z stays the field's own (Qt gives the focused editor
the shortcut first)."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu
from shiboken6 import isValid


class EditMenuActions(QObject):
    """Owns the two actions and mirrors the stack into them (bound methods, no closures over Qt objects)."""

    def __init__(self, window, menu) -> None:
        super().__init__(window)
        self.stack = window.app.undo
        self.undo = QAction("Undo", window)
        self.undo.setShortcut(QKeySequence.Undo)
        self.redo = QAction("Redo", window)
        redo_keys = [QKeySequence("Ctrl+Shift+Z")]
        redo_keys += [k for k in QKeySequence.keyBindings(QKeySequence.Redo) if k not in redo_keys]  # Ctrl+Y too
        self.redo.setShortcuts(redo_keys)
        self.undo.triggered.connect(self.stack.undo)
        self.redo.triggered.connect(self.stack.redo)
        menu.addAction(self.undo)
        menu.addAction(self.redo)
        self.stack.changed.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        if not isValid(self.undo):  # the window is closing: its actions went first
            return
        self.undo.setEnabled(self.stack.can_undo())
        self.redo.setEnabled(self.stack.can_redo())
        self.undo.setText(f"Undo {self.stack.undo_text()}" if self.stack.can_undo() else "Undo")
        self.redo.setText(f"Redo {self.stack.redo_text()}" if self.stack.can_redo() else "Redo")


def build_edit_menu(window) -> QMenu:
    """The Edit menu, placed after File (the menu bar's second menu, where people look for it); its actions come
    with the Folder tab (`fill_edit_menu`)."""
    bar = window.menuBar()
    menu = QMenu("&Edit", window)
    after_file = bar.actions()[1:2]  # the menu after File, if there is one yet
    if after_file:
        bar.insertMenu(after_file[0], menu)
    else:
        bar.addMenu(menu)
    window.edit_menu = menu
    return menu


def fill_edit_menu(window) -> EditMenuActions:
    """Undo and Redo of the Folder tab's stack, in the Edit menu."""
    window.edit_actions = EditMenuActions(window, window.edit_menu)
    return window.edit_actions
