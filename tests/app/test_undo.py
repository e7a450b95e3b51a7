"""The app's one undo stack (vitstudio/app/undo.py), without Qt: order, redo, refusal and a bounded history."""

from __future__ import annotations

import gc
import weakref

from vitstudio.app.undo import UndoRefused, UndoStack


class _Step:
    def __init__(self, log: list, name: str, payload=None, refuse: bool = False) -> None:
        self.log, self.text, self.payload, self.refuse = log, name, payload, refuse

    def redo(self) -> None:
        if self.refuse:
            raise UndoRefused(f"{self.text} cannot be redone now")
        self.log.append(("do", self.text))

    def undo(self) -> None:
        if self.refuse:
            raise UndoRefused(f"{self.text} cannot be undone now")
        self.log.append(("undo", self.text))


def test_steps_are_undone_in_reverse_and_a_new_step_drops_what_was_undone():
    """push does a step (or takes one already done), undo and redo walk back and forth in order, the texts name the
    next step each way, and a step pushed after an undo makes the undone one unreachable."""
    log: list = []
    stack, heard = UndoStack(), []
    stack.changed.connect(lambda: heard.append(stack.index))
    stack.push(_Step(log, "sort"))
    stack.push(_Step(log, "label"), done=True)
    assert log == [("do", "sort")] and stack.undo_text() == "label" and not stack.can_redo()
    assert stack.undo() and stack.undo() and not stack.undo()
    assert log[1:] == [("undo", "label"), ("undo", "sort")] and stack.redo_text() == "sort"
    assert stack.redo() and stack.undo_text() == "sort" and stack.redo_text() == "label"
    stack.push(_Step(log, "stroke"), done=True)
    assert not stack.can_redo() and [c.text for c in stack.commands] == ["sort", "stroke"]
    assert heard == [1, 2, 1, 0, 1, 2]


def test_a_refused_step_stays_and_is_said():
    """A step that cannot be undone now raises UndoRefused: the stack stays where it is and says why in one line."""
    log, said = [], []
    stack = UndoStack()
    stack.refused.connect(said.append)
    stack.push(_Step(log, "stroke", refuse=True), done=True)
    assert not stack.undo() and stack.index == 1 and said == ["stroke cannot be undone now"]


def test_the_undo_history_is_bounded_and_lets_go_of_old_steps():
    """Each step keeps what it needs to undo (a sort's whole plan, a review item with its thumbnail); only the last
    `limit` stay, and the older ones are let go with what they held."""

    class Payload:
        pass

    stack = UndoStack(limit=50)
    first = Payload()
    oldest = weakref.ref(first)
    stack.push(_Step([], "first", first), done=True)
    del first
    for i in range(1000):
        stack.push(_Step([], str(i), Payload()), done=True)
    gc.collect()
    assert len(stack.commands) == 50 and stack.undo_text() == "999" and oldest() is None
