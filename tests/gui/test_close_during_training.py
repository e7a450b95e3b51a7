"""Closing the window while a run trains asks: stay, keep training and close when done, or cancel and close
(issue 29, item 4: it cancelled the run without a word)."""

from __future__ import annotations

from tests.core.synthetic_data import make_dataset
from tests.gui.test_training_panel import _setup, _training_tab
from vitstudio.core.train.runs import run_status
from vitstudio.gui import closing


def _answering(monkeypatch, answers: list[str], asked: list[str], paused_when_asked: list[bool] | None = None):
    def ask(_parent, run, paused=False):
        asked.append(run)
        if paused_when_asked is not None:
            paused_when_asked.append(paused)
        return answers.pop(0)

    monkeypatch.setattr(closing, "ask_close_during_training", ask)


def test_close_during_training_stays_then_closes_when_done(window, qtbot, tmp_path, monkeypatch):
    """Stay leaves the window and the paused run as they were; "Keep training, close when done" keeps both and says so,
    and the window closes once the run has finished. [window] [fine-tune] "Keep training, close when done" is said in
    the status-bar notice and the window title, whatever tab is shown (the walk saw no sign of it). The question says a
    paused run is paused, and keeping it resumes it (it stayed paused, so the window would never close: the walk).
    """
    asked: list[str] = []
    paused: list[bool] = []  # what each question said of the run
    _answering(monkeypatch, [closing.STAY, closing.KEEP], asked, paused)
    panel = _setup(_training_tab(window), qtbot, make_dataset(tmp_path / "data", per_class=6), epochs=2)
    panel.start()
    panel.controls.pause_button.setChecked(True)  # held mid-run while the window is closed
    assert panel.running and panel.controls.pause_button.text() == "Continue"  # not "Resume", beside "Resume run"
    window._refresh_status()
    assert "(paused)" in window.status_jobs.text()  # the status bar said "Training" (the walk)
    window.close()
    assert window.isVisible() and panel.running and asked  # Stay: nothing changed
    window.close()
    assert window.isVisible() and panel.running and "closes when" in panel.controls.status.text()
    # said where the user looks, whatever the tab (the walk saw the window just stay as it was)
    assert window.notice.isVisible() and "closes when" in window.notice.text
    assert window.windowTitle().endswith("closes when the run ends")
    run = panel.active_run
    # kept while paused: resumed by the answer, or it would never end and the window never close (the walk)
    assert not panel.controls.pause_button.isChecked()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=60000)  # the run finished, then the window closed
    assert run_status(run) == "finished" and len(asked) == 2 and paused == [True, True]


def test_cancel_and_close_stops_the_run_resumably(window, qtbot, tmp_path, monkeypatch):
    """"Cancel the run and close" closes the window and stops the run (cancelled, or finished if it ended first), asked
    once with the run's name. [window] [fine-tune]
    """
    asked: list[str] = []
    _answering(monkeypatch, [closing.CANCEL], asked)
    panel = _setup(_training_tab(window), qtbot, make_dataset(tmp_path / "data", per_class=6), epochs=3)
    panel.start()
    qtbot.waitUntil(lambda: len(panel.shown.epochs["epoch"]) >= 1, timeout=60000)
    run = panel.active_run
    window.close()
    assert not window.isVisible() and not panel.running and asked == [run.name]
    assert run_status(run) in ("cancelled", "finished")  # (3 tiny epochs may end before the cancel arrives)


def test_closing_without_a_run_asks_nothing(window, monkeypatch):
    """No run: the window closes without a question. [window]"""
    asked: list[str] = []
    _answering(monkeypatch, [], asked)
    window.close()
    assert not window.isVisible() and asked == []


def test_a_run_that_ends_while_the_question_is_open_lets_the_window_close(window, monkeypatch):
    """Answered "keep training, close when done" after the run had finished behind the question, the window
    stayed open for good (the run's end had come and gone): nothing is left to wait for, so it closes.

    [window]
    """
    from types import SimpleNamespace

    training = window.training
    training.job = SimpleNamespace(done=False)  # a run in progress, as far as the question is concerned

    def ask(_parent, _run, paused=False):
        training.job.done = True  # the run ends while the box is open
        return answers.pop(0)

    answers = [closing.STAY, closing.KEEP]
    monkeypatch.setattr(closing, "ask_close_during_training", ask)
    window.close()
    assert window.isVisible()  # Stay is still Stay
    training.job.done = False
    window.close()
    assert not window.isVisible() and answers == []
