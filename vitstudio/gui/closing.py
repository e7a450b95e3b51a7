"""Closing the window (or Quit) while a run trains asks first, as trainers with a window do: keep training and close
when it has finished, cancel the run and close (the last finished epoch stays resumable from History), or stay.
A close never ends a run without a word: the run may be hours of work.

"Close when done" keeps the window open, saying so in the Training tab; it closes when the run finishes or is
cancelled. A run that fails leaves the window open with its failure on screen. Closing again while waiting asks
again."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QMessageBox, QWidget

KEEP, CANCEL, STAY = "keep training, close when done", "cancel the run and close", "stay"


def ask_close_during_training(parent: QWidget, run: str, paused: bool = False) -> str:
    """KEEP, CANCEL or STAY (also for Escape and the box's close button). A paused run is said to be paused, and
    keeping it resumes it: paused, it would never end and the window never close."""
    box = QMessageBox(QMessageBox.Question, "A run is training",
                      f"{run} is {'paused' if paused else 'still training'}. Closing ViT Studio stops it (the last "
                      "finished epoch is kept, and Resume run in History continues from there).", parent=parent)
    keep = box.addButton("Resume training, close when done" if paused else "Keep training, close when done",
                         QMessageBox.AcceptRole)
    cancel = box.addButton("Cancel the run and close", QMessageBox.DestructiveRole)
    stay = box.addButton("Stay", QMessageBox.RejectRole)
    box.setDefaultButton(keep)
    box.setEscapeButton(stay)
    box.exec()
    clicked = box.clickedButton()
    return KEEP if clicked is keep else CANCEL if clicked is cancel else STAY


class CloseGuard(QObject):
    """The window's closeEvent asks `allows_close()`; with KEEP the window closes itself when the run has ended."""

    def __init__(self, window: QWidget, training) -> None:
        super().__init__(window)
        self.window, self.training = window, training
        self.waiting = False  # the user chose "close when done"
        training.run_ended.connect(self._on_run_ended)

    def allows_close(self) -> bool:
        if not self.training.running:
            return True
        run = self.training.active_run.name if self.training.active_run is not None else "A run"
        paused = self.training.controls.pause_button.isChecked()
        answer = ask_close_during_training(self.window, run, paused)
        if not self.training.running:  # it ended while the question was open: there is nothing left to wait for
            return answer != STAY
        self.waiting = answer == KEEP
        if self.waiting and paused:
            self.training.controls.pause_button.setChecked(False)  # resumed: a paused run never ends
        if self.waiting:  # said where the user looks, whatever tab is shown (the window just stayed as it was)
            said = f"ViT Studio closes when {run} has finished (close again to choose otherwise)."
            self.training.controls.status.setText(said)
            self.window.show_notice(said)
            self.window.setWindowTitle(f"{self.window.windowTitle()} — closes when the run ends")
        return answer == CANCEL

    def _on_run_ended(self, finished: bool) -> None:
        if self.waiting and finished:
            self.waiting = False
            QTimer.singleShot(0, self.window.close)  # after the panel has shown the run's end
        elif self.waiting:
            self.waiting = False  # failed: the window stays, with the failure on screen
            self.window.setWindowTitle(self.window.windowTitle().removesuffix(" — closes when the run ends"))
