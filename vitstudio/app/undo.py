"""The app's one undo stack, Qt-free: sorts and moves of files, exclusions, label edits and paint strokes are
commands on it, so Edit → Undo (Ctrl+Z) takes back the last change the user made wherever it was made, in order.

A command has `text` (what the Edit menu names: "Undo Sort 40 images into sorted") and `undo()`/`redo()`. `push`
runs its `redo()` first unless the change is already made (a paint stroke is painted as the pointer moves). A
command that cannot be taken back now (its folder is not the one open; a file job still runs) raises
`UndoRefused` with one line for the user: the stack does not move and says it on `refused`. Nothing the user
changed outside the app is undone over: file commands go through the sort journal, which checks each file first."""

from __future__ import annotations

from typing import Protocol

from .evented import Event, EventedModel

UNDO_LIMIT = 50  # steps Edit → Undo reaches back; older sorts stay undoable from the command line's journal


class UndoRefused(Exception):
    """The command cannot be undone or redone now; the message says why, in one line."""


class Command(Protocol):
    text: str

    def undo(self) -> None: ...

    def redo(self) -> None: ...


class UndoStack(EventedModel):
    changed = Event("what can be undone or redone changed")
    refused = Event("one line: why the last undo or redo could not be done")

    def __init__(self, limit: int = UNDO_LIMIT) -> None:
        self.limit = limit
        self.commands: list[Command] = []
        self.index = 0  # commands[:index] are done; commands[index:] were undone and can be redone

    def push(self, command: Command, done: bool = False) -> None:
        """`command` done now (`redo()`), or already done (`done=True`); what was undone can no longer be redone."""
        del self.commands[self.index:]
        if not done:
            command.redo()
        self.commands.append(command)
        del self.commands[:max(0, len(self.commands) - self.limit)]
        self.index = len(self.commands)
        self.changed.emit()

    def can_undo(self) -> bool:
        return self.index > 0

    def can_redo(self) -> bool:
        return self.index < len(self.commands)

    def undo_text(self) -> str:
        return self.commands[self.index - 1].text if self.can_undo() else ""

    def redo_text(self) -> str:
        return self.commands[self.index].text if self.can_redo() else ""

    def undo(self) -> bool:
        """Take back the last change; False when there is none or it was refused (said on `refused`)."""
        if not self.can_undo():
            return False
        try:
            self.commands[self.index - 1].undo()
        except UndoRefused as exc:
            self.refused.emit(str(exc))
            return False
        self.index -= 1
        self.changed.emit()
        return True

    def redo(self) -> bool:
        if not self.can_redo():
            return False
        try:
            self.commands[self.index].redo()
        except UndoRefused as exc:
            self.refused.emit(str(exc))
            return False
        self.index += 1
        self.changed.emit()
        return True

    def clear(self) -> None:
        self.commands, self.index = [], 0
        self.changed.emit()
