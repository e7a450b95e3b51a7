"""State that used to live in widgets lives in typed view state, and errors travel as exception objects: the
model bar's device and precision, the Folder tab's filters, and the notifier every error goes through."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import TINY_SPEC
from tests.gui.helpers import settle as _settle
from vitstudio.app.notices import Notice
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.gui import workers


def test_model_bar_mirrors_the_app_view_state(window, qtbot, tiny_weights):
    """Model bar precision/device and view state mirror each other both ways; invalid precision refused; a load without
    device uses the bar's; the model is held only by AppState. [window]
    """
    view, bar = window.state.view, window.model_panel
    bar.precision.setCurrentText("fp32")  # a user's choice reaches the state …
    assert view.precision == "fp32"
    view.update(precision="bf16", device="cpu")  # … and the state reaches the widgets
    assert (bar.precision.currentText(), bar.device.currentText()) == ("bf16", "cpu")
    with pytest.raises(ValueError, match="precision"):
        view.update(precision="fp8-ish")  # validated: a value no combo offers is refused
    weights, _ = tiny_weights
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        bar.set_spec(TINY_SPEC)
        window.request_model(TINY_SPEC, weights=str(weights))  # no device given: the bar's
    assert window.state.model.precision == "bf16"
    assert (view.requested.spec, view.requested.device, view.requested.precision, view.requested.weights) == \
        (TINY_SPEC, "cpu", "bf16", str(weights))
    assert view.model == window.state.model.uid
    assert window.loader.jobs.results["load"] is None  # the model is held by AppState only


def test_errors_reach_one_notifier_as_exception_objects(window, qtbot):
    """A job's OSError reaches `state.error` as a Notice with the exception, message and traceback, and shows in log
    view and status bar. [window]
    """
    notices = []
    window.state.error.connect(notices.append)

    def broken(cancel):
        raise OSError(28, "No space left on device")

    workers.start_job("Writing", broken, on_error=window._on_job_error)
    qtbot.waitUntil(lambda: len(notices) == 1, timeout=5000)
    notice = notices[0]
    assert isinstance(notice, Notice) and isinstance(notice.exc, OSError) and notice.exc.errno == 28
    assert "No space left" in notice.message and "Traceback" in notice.details
    assert "No space left" in window.log_view.toPlainText()
    assert "No space left" in window.statusBar().currentMessage()


def test_folder_filters_live_in_the_view_state(panel, qtbot, tmp_path):
    """Folder filters set on the view state filter rows (checked against numpy on the results) and update widgets;
    widget clicks update state; reopening the folder keeps the predicted filter shown in its rebuilt combo; reset
    restores all rows. [panel]
    """
    from vitstudio.gui.folder.folder_panel import FolderPanel

    data = render_digits(tmp_path / "digits", per_class=6)
    panel = panel(FolderPanel, model=bundled_demo())  # the Folder tab alone
    panel.open_folder(str(data))
    _settle(qtbot)
    results, vs = panel.results, panel.view_state
    vs.update(min_conf=0.9, correct=True)  # set as data: the table and the widgets follow
    expected = np.flatnonzero((results.confidence >= 0.9) & (results.correct() == 1))
    assert sorted(panel.visible_rows()) == expected.tolist()
    assert panel.toolbar.min_conf.value() == pytest.approx(0.9) and panel.toolbar.correctness.currentData() is True
    panel.toolbar.correctness.setCurrentIndex(2)  # a user's click reaches the state
    assert vs.correct is False
    label = results.labels[int(results.predicted[0])]
    vs.predicted = label
    assert panel.toolbar.predicted.currentData() == label
    assert all(results.labels[int(results.predicted[r])] == label for r in panel.visible_rows())
    shown = sorted(panel.visible_rows())
    panel.open_folder(str(data))  # the same folder again: the rebuilt class list still shows the filter kept
    _settle(qtbot)
    assert vs.predicted == label and panel.toolbar.predicted.currentData() == label
    assert sorted(panel.visible_rows()) == shown
    panel.reset_filters()
    assert (vs.predicted, vs.min_conf, vs.correct, vs.follow_map) == (None, 0.0, None, False)
    assert panel.toolbar.predicted.currentIndex() == 0 and panel.toolbar.min_conf.value() == 0.0
    assert len(panel.visible_rows()) == len(results)


def test_no_error_travels_as_a_string():
    """Every error goes through `AppState.report` (an exception object, details on demand): a `message` signal with
    the level "error" anywhere in the GUI would be a string the notifier never sees."""
    import re
    from pathlib import Path

    import vitstudio.gui

    root = Path(vitstudio.gui.__file__).parent
    offenders = [f"{path.relative_to(root)}:{n}" for path in root.rglob("*.py")
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"""(message\.emit|report)\(\s*["']error["']""", line)]
    assert offenders == []


def test_the_model_bar_lists_the_demo_once(qtbot):
    """The bundled demo is the first entry, by its title; the catalog (which finds its folder under models/ too)
    does not list it again by its path (issue 29: "the demo listed twice")."""
    from vitstudio.app.app_state import AppState
    from vitstudio.core.models.demo import DEMO_TITLE, bundled_demo
    from vitstudio.gui.common.model_panel import ModelPanel

    bar = ModelPanel(AppState())
    qtbot.addWidget(bar)
    specs = bar.catalog_names()
    assert bar.name.itemText(0) == f"★ {DEMO_TITLE}" and specs[0] == str(bundled_demo())
    assert specs.count(str(bundled_demo())) == 1 and len(specs) == len(set(specs)) and len(specs) > 100


def test_a_long_error_is_elided_beside_the_error_button_not_cut_under_it(window, qtbot):
    """Issue 29, item 12: QStatusBar cut a long message at its permanent widgets' edge without a sign. It is elided
    in the middle to the room they leave (what failed, first, and how, last, stay), the whole text in the tooltip and
    the log.

    At 1280×720 a 700-character error is elided in the middle (its start and end kept) to fit left of the error button,
    which stays inside the bar; the whole text is in the tooltip, the log and `window.passing.text`; a short message
    after it is whole with no tooltip. [window] It ends 16 px before the jobs label ("cpu · fp32 · RAM…"; it touched it:
    the walk).
    """
    window.resize(1280, 720)
    qtbot.wait(50)
    whole = "Could not read " + "/very/long/folder/name" * 30 + "/photo.jpg: the file is truncated"
    window.state.report(OSError(5, whole))
    qtbot.wait(50)
    shown = window.statusBar().currentMessage()
    bar = window.statusBar()
    assert "…" in shown and shown.startswith("[Errno 5] Could not read /very/long/") and shown.endswith("truncated")
    assert bar.fontMetrics().horizontalAdvance(shown) <= window.error_indicator.x() - 8
    assert bar.fontMetrics().horizontalAdvance(shown) <= window.status_jobs.x() - 16  # a gap before "cpu · …" (walk)
    assert window.error_indicator.isVisible() and window.error_indicator.geometry().right() <= bar.width()
    assert whole in bar.toolTip() and whole in window.log_view.toPlainText() and whole in window.passing.text
    window.state.message.emit("info", "Saved view.png")  # a short one: whole, and no stale tooltip
    assert bar.currentMessage() == "Saved view.png" and bar.toolTip() == ""


def test_a_passing_message_is_cut_between_words_again_when_the_jobs_label_grows(window, qtbot, monkeypatch):
    """The status bar cut a message mid-word: Qt's middle elision cuts inside a word, and a message shown while the
    jobs label was short was clipped under it when it grew (a job started), with no sign and no tooltip. A message
    is elided between words (or a path's parts) and again when the room changes, the whole in the tooltip; the jobs
    label counts "1 image" (it said "1 images"). [window]"""
    from types import SimpleNamespace

    from PIL import Image
    from PySide6.QtWidgets import QApplication

    from vitstudio.app.app_state import make_entry
    from vitstudio.gui import main_window

    window.resize(1280, 720)
    window._status_timer.stop()  # the jobs label refreshed by the test, as the timer does
    jobs = []
    monkeypatch.setattr(main_window.workers, "running_jobs", lambda: jobs)
    window._refresh_status()
    QApplication.processEvents()
    whole = ("Drop images or folders on the window. Models marked ● have weights available offline; others need a "
             "network once, or a file in models/. ") * 2 + "Reading /data/photos/holidays/2024/beach.jpg"
    window.state.message.emit("info", whole)
    bar = window.statusBar()

    def whole_words_in_room() -> bool:
        shown = bar.currentMessage()
        return bar.fontMetrics().horizontalAdvance(shown) <= window.status_jobs.x() - 16 and "…" in shown

    qtbot.waitUntil(whole_words_in_room)
    short_room = bar.currentMessage()
    jobs += [SimpleNamespace(name=name, cancel_token=SimpleNamespace(paused=False))
             for name in ("Reading images", "Label review", "Embedding the folder", "Teaching")]
    window._refresh_status()  # a job started: the jobs label grows
    jobs.clear()  # stand-ins: nothing for the window's shutdown to cancel
    qtbot.waitUntil(lambda: whole_words_in_room() and bar.currentMessage() != short_room)
    for shown in (short_room, bar.currentMessage()):  # the start and the end of the whole, cut between words
        head, tail = shown.split("…")
        tail = tail.lstrip()
        assert head.startswith("Drop images") and tail.endswith("beach.jpg") and len(head) > 20, shown
        assert whole.startswith(head) and head[-1] in " /" and whole.endswith(tail) and whole[-len(tail) - 1] in " /"
    assert bar.toolTip() == whole
    window.state.add_images([make_entry("one", Image.new("RGB", (8, 8)))])
    window._refresh_status()
    assert " · 1 image · " in window.status_jobs.text()


def test_the_training_and_compare_model_lists_carry_the_model_bars_marks(window):
    """The walk: the model bar marks each model ● (weights here) ○ (from the hub) · (none), but the Training tab's
    base model and Compare's second model listed plain specs, so a user picked a base model with no weights here
    and learnt it at Start. They carry the same marks as icons with the meaning as tooltip; the text stays the spec
    (what the fields read and the user types).

    The Training tab's base model and Compare's second model list every model of the bar with its mark (★ ● ○ ·) as an
    icon and its meaning as tooltip, the text the spec (the walk: a base model without weights here was learnt of only
    at Start).; their open lists are wide enough for a long timm name whole (the boxes are ~190 px at 1280×720: the walk
    read them elided). [window]
    """
    from PySide6.QtCore import Qt

    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.gui.common.model_marks import MEANINGS

    marks = window.model_panel.catalog_marks()
    assert marks[str(bundled_demo())] == "★" and {"·", "○"} <= set(marks.values())
    for combo in (window.training.dataset.base_model, window.compare.other_name):
        assert combo.count() == len(marks)
        # the open list shows a long timm name whole, however narrow the box is at 1280×720 (the walk: elided)
        long = combo.view().fontMetrics().horizontalAdvance("aimv2_1b_patch14_224.apple_pt") + 60
        assert combo.view().minimumWidth() >= long
        for index in range(combo.count()):
            spec = combo.itemText(index)
            assert spec in marks and not combo.itemIcon(index).isNull(), spec
            assert combo.itemData(index, Qt.ToolTipRole) == MEANINGS[marks[spec]]
    # marking the items leaves what each field holds: Compare's second model stays empty, not the first model listed
    # (an editable combo shows its current item's text again when that item's icon is set)
    assert window.compare.other_name.currentText() == ""


def test_a_run_that_ends_is_listed_in_every_model_list_at_once(window):
    """The walk: a run trained in this session was missing from the Training tab's base models (and Compare's and
    the model bar's lists) until a restart. When a run ends, what models/ holds anew is listed after the demo in the
    three lists, marked ●; what each field holds stays.

    [window]
    """
    import shutil

    from vitstudio.core.models.catalog import models_dir
    from vitstudio.core.models.demo import bundled_demo

    window.training.dataset.base_model.setEditText("typed by the user")
    run = models_dir() / "my-run"
    shutil.copytree(bundled_demo(), run)
    window.training.run_ended.emit(True)
    bar = window.model_panel
    assert bar.name.itemText(1) == f"● {run}" and bar.catalog_names().count(str(run)) == 1
    for combo in (window.training.dataset.base_model, window.compare.other_name):
        assert combo.itemText(1) == str(run) and not combo.itemIcon(1).isNull()
    assert window.training.dataset.base_model.currentText() == "typed by the user"
    window.training.run_ended.emit(True)  # nothing new: listed once
    assert [window.compare.other_name.itemText(i) for i in range(3)].count(str(run)) == 1


def test_a_model_picked_from_the_list_loads_and_return_on_a_listed_name_asks_once(qtbot):
    """Picking from the model bar's list requests that model (the name changed while the old model stayed, in the
    title and Compare, until Load); Return on a listed name (returnPressed arrives twice with the completer):
    one request; the Load button loads again."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from vitstudio.app.app_state import AppState
    from vitstudio.core.models.demo import bundled_demo
    from vitstudio.gui.common.model_panel import ModelPanel

    state = AppState()
    requested = []
    state.view.events.requested.connect(requested.append)
    bar = ModelPanel(state, catalog=False)
    qtbot.addWidget(bar)
    bar.show()
    bar.name.setCurrentIndex(0)
    bar.name.activated.emit(0)  # what the list's popup sends when the user picks the demo
    assert [r.spec for r in requested] == [str(bundled_demo())]
    bar.name.activated.emit(0)  # picked again while it is the model asked for: nothing new
    assert len(requested) == 1
    state.loading = None  # the load failed, say: Return asks again, once
    requested.clear()
    bar.name.lineEdit().setText(bar.name.itemText(0))
    QTest.keyClick(bar.name.lineEdit(), Qt.Key_Return)
    assert [r.spec for r in requested] == [str(bundled_demo())]
    bar.load_button.click()  # an explicit Load: again (the files may have changed)
    assert len(requested) == 2 and requested[0] != requested[1]


def test_a_run_warnings_newer_figures_replace_it_in_the_status_bar_not_the_log(window):
    """A run warning said once (log and status bar) is updated each epoch: the status bar shows the newer figures
    while it still shows the warning (it kept "53.6 % after 2 epochs" while the panel said 56.9 % after 7), the log
    is not filled with every update, and a withdrawn warning leaves the status bar.

    [window]
    """
    from vitstudio.core.train.records import RunWarning

    panel = window.training
    panel._on_record(RunWarning("val accuracy 53.6 % after 2 epochs: near chance", kind="chance level"))
    assert window.passing.text.startswith("val accuracy 53.6 %")
    logged = window.log_view.toPlainText().count("near chance")
    panel._on_record(RunWarning("val accuracy 56.9 % after 7 epochs: near chance", kind="chance level", update=True))
    assert window.passing.text.startswith("val accuracy 56.9 %") and "56.9" in window.statusBar().currentMessage()
    assert window.log_view.toPlainText().count("near chance") == logged == 1
    panel._on_record(RunWarning("", kind="chance level", update=True))  # the run recovered: the warning goes
    assert window.statusBar().currentMessage() == ""


def test_a_notice_in_the_status_bar_is_cut_between_words(qtbot):
    """The notice kept in the status bar (a crash log, an export, with its link) was elided in the middle of a word
    as the passing messages were: it is cut between words, its link whole, the whole text in its tooltip."""
    from vitstudio.gui.status_notice import StatusNoticeWidget

    notice = StatusNoticeWidget()
    qtbot.addWidget(notice)
    notice.resize(420, 30)
    notice.show()
    whole = "Exported the taught model to /data/teach/export: timm, ONNX and the seed format predict as the " \
            "preview on all 1,240 samples (check.json beside them)."
    notice.show_notice(whole, "/data/teach/export")
    qtbot.waitUntil(lambda: "…" in notice.label.text())
    head, tail = notice.label.text().split(" · ", 1)[1].split("…")
    tail = tail.lstrip()
    assert head.startswith("Exported") and whole.startswith(head) and head[-1] in " /"
    assert whole.endswith(tail) and whole[-len(tail) - 1] in " /" and notice.toolTip().startswith(whole)
