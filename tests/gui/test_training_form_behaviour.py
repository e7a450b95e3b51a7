"""Issue 21 items 2, 3 and the Training side of 6, through the real window: the wheel never changes an input the
user is not editing, a preset keeps the user's values, Start says why it cannot run, each run gets a fresh name,
the window fits a 1280×720 screen, and the Training tab's status, Paused state and History line follow the run."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QComboBox, QScrollArea

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset
from vitstudio.gui import workers
from vitstudio.gui.training.training_panel import TrainingPanel

SPEC3 = TINY_SPEC.replace("classes=5", "classes=3")


def _wheel(widget, notches: int = -1) -> None:
    """One wheel notch over the middle of `widget`, as the mouse would send it."""
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    event = QWheelEvent(pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(), QPoint(0, 120 * notches),
                        Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def _value(widget):
    return widget.value() if isinstance(widget, QAbstractSpinBox) else widget.currentIndex()


def _scroll_area_of(widget) -> QScrollArea:
    while not isinstance(widget, QScrollArea):
        widget = widget.parentWidget()
    return widget


def _scanned(panel, qtbot, folder):
    """The Training panel with `folder` chosen and scanned."""
    panel.set_dataset(str(folder))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    return panel


# -- item 2: forms that never change behind your back ---------------------------------------------------------------

def test_wheel_over_an_unfocused_input_changes_nothing_anywhere_and_scrolls_the_form(window, qtbot):
    """The wheel over any unfocused spin/combo box (> 50 in the window) changes nothing and scrolls the form; all have
    StrongFocus; focused, it edits. [window]
    """
    panel = window.training
    window.show_tab("training")
    panel.form.advanced.setChecked(True)  # a long form: its column scrolls
    qtbot.wait(50)
    panel.dataset.run_name.setFocus()  # the keyboard is elsewhere
    column = _scroll_area_of(panel.form).verticalScrollBar()
    assert column.maximum() > 0
    epochs, preset = panel.form.inputs["epochs"], panel.form.preset
    before = (epochs.value(), preset.currentText(), column.value())
    _wheel(epochs)
    _wheel(preset)
    assert (epochs.value(), preset.currentText()) == before[:2]
    assert column.value() > before[2]  # the wheel scrolled the form instead
    # every spin box and combo box of every tab: an unfocused one ignores the wheel, and takes no focus from it
    inputs = [w for w in window.findChildren(QAbstractSpinBox) + window.findChildren(QComboBox) if w.isEnabled()]
    assert len(inputs) > 50  # the Training form alone has ~45
    for widget in inputs:
        if not widget.hasFocus():
            value = _value(widget)
            _wheel(widget, 1)
            _wheel(widget, -1)
            assert _value(widget) == value, widget
            assert widget.focusPolicy() == Qt.StrongFocus, widget
    # once the user clicks into it, the wheel edits it as usual
    epochs.setFocus()
    qtbot.waitUntil(epochs.hasFocus, timeout=2000)
    _wheel(epochs, 1)
    assert epochs.value() == before[0] + 1


def test_no_python_filter_sees_every_event_and_inputs_made_later_are_guarded(qtbot, monkeypatch):
    """The wheel guard and the window's keys filter only the inputs they guard: a filter on the application is a
    Python call for every event of every object (building the window took 2.0-3.7 s with the two of them there,
    0.9-1.1 s without). An input made after the window (a dialog's, a form generated later) is guarded all the same,
    by the style that polishes it.

    [window]
    """
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QDialog, QSpinBox, QVBoxLayout

    from vitstudio.gui.main_window import MainWindow

    on_app = []
    real = QCoreApplication.installEventFilter

    def record(target, filter_object):
        if target is QApplication.instance():
            on_app.append(type(filter_object).__name__)
        return real(target, filter_object)

    monkeypatch.setattr(QCoreApplication, "installEventFilter", record)
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    assert on_app == []
    dialog = QDialog(window)
    layout = QVBoxLayout(dialog)
    spin, other = QSpinBox(), QSpinBox()
    layout.addWidget(spin)
    layout.addWidget(other)
    dialog.show()
    other.setFocus()
    qtbot.waitUntil(other.hasFocus, timeout=2000)
    _wheel(spin, 1)
    assert spin.value() == 0 and spin.focusPolicy() == Qt.StrongFocus
    _wheel(other, 1)
    assert other.value() == 1  # focused: the wheel is its own
    dialog.close()
    workers.shutdown(5000)


def test_a_preset_change_keeps_the_users_values_and_says_so(panel):
    """Every preset has a description; switching presets keeps user-set epochs, follows the preset elsewhere, notes
    which were kept; "use the preset's values" resets. [panel]
    """
    from vitstudio.core.train.recipes import PRESET_DESCRIPTIONS, PRESETS

    form = panel(TrainingPanel).form
    assert set(PRESET_DESCRIPTIONS) == set(PRESETS) and all(PRESET_DESCRIPTIONS.values())
    assert form.inputs["epochs"].isVisible() and not form.advanced.isChecked()  # epochs without Advanced
    assert form.preset_description.text() == f"<i>{PRESET_DESCRIPTIONS['last-blocks']}</i>"
    assert not form.preset_note.isVisibleTo(form)
    form.inputs["epochs"].setValue(30)
    form.preset.setCurrentText("full")
    assert form.inputs["epochs"].value() == 30  # the user's 30 epochs stay
    assert form.inputs["lr"].value() == PRESETS["full"]["lr"]  # what the user did not touch follows the preset
    assert form.controls["scope"].value() == "all"
    assert PRESET_DESCRIPTIONS["full"] in form.preset_description.text()
    assert form.preset_note.isVisibleTo(form) and "epochs" in form.preset_note.text()
    assert "learning rate" not in form.preset_note.text()
    assert form.config("d", "m", "o").epochs == 30
    form.preset.setCurrentText("scratch")  # still the user's, preset after preset
    assert form.inputs["epochs"].value() == 30 and form.inputs["lr"].value() == PRESETS["scratch"]["lr"]
    form.preset_note.linkActivated.emit("preset")  # "Use the preset's values for all"
    assert form.inputs["epochs"].value() == PRESETS["scratch"]["epochs"]
    assert not form.preset_note.isVisibleTo(form)


def test_start_is_disabled_with_the_reason_as_its_tooltip(panel, qtbot, tmp_path):
    """Start is disabled with the reason (no dataset, unusable dataset, no base model, bad mean, run name taken or
    containing "/") and enabled otherwise. [panel] A class of one image (no split can hold it) disables Start with
    "cannot be split" (the walk: Start stayed enabled beside "Too small to split" and failed at once).
    """
    from vitstudio.core.models.catalog import models_dir

    panel = panel(TrainingPanel)
    start = panel.controls.start_button
    assert not start.isEnabled() and "dataset folder" in start.toolTip()
    panel.start()  # a direct call refuses too, with the reason
    assert "dataset folder" in panel.controls.status.text()
    (tmp_path / "empty").mkdir()
    panel.set_dataset(str(tmp_path / "empty"))
    qtbot.waitUntil(lambda: "cannot be used" in start.toolTip(), timeout=10000)
    assert not start.isEnabled()
    lonely = make_dataset(tmp_path / "lonely", per_class=6)
    for extra in sorted((lonely / sorted(p.name for p in lonely.iterdir())[0]).iterdir())[1:]:
        extra.unlink()  # one image left in the first class: no split can hold it (the walk: Start stayed enabled)
    panel = _scanned(panel, qtbot, lonely)
    panel.dataset.base_model.setEditText(SPEC3)
    assert not start.isEnabled() and "cannot be split" in start.toolTip(), start.toolTip()
    panel.dataset.base_model.setEditText("")
    panel = _scanned(panel, qtbot, make_dataset(tmp_path / "data", per_class=6))
    assert "dataset folder" not in panel.controls.status.text()  # the dataset's complaint is over (item 6)
    assert not start.isEnabled() and "base model" in start.toolTip()
    panel.dataset.base_model.setEditText(SPEC3)
    assert start.isEnabled(), start.toolTip()
    panel.form.advanced.setChecked(True)
    panel.form.controls["mean"].widget.setText("0.5, 0.5")  # two numbers for three channels
    assert not start.isEnabled() and "mean" in start.toolTip()
    panel.form.controls["mean"].widget.setText("")
    assert start.isEnabled()
    (models_dir() / "taken").mkdir(parents=True)
    panel.dataset.run_name.setText("taken")
    assert not start.isEnabled() and "already exists" in start.toolTip()
    panel.dataset.run_name.setText("a/b")
    assert not start.isEnabled() and "cannot contain" in start.toolTip()


def test_a_typed_dataset_is_scanned_once_so_the_first_click_on_start_counts(panel, qtbot, tmp_path):
    """The walk: a dataset path typed and entered with Return, then one click on Start did nothing: the click took
    the focus from the field, whose editingFinished scanned the folder again, and Start was disabled under the
    mouse until that scan ended. The same folder is not scanned again; another one typed is."""
    panel = panel(TrainingPanel)
    panel.dataset.base_model.setEditText(SPEC3)
    data = make_dataset(tmp_path / "data", per_class=6)
    scans = []
    real_start = panel.dataset_actions.jobs.start
    panel.dataset_actions.jobs.start = lambda key, *a, **k: scans.append(key) or real_start(key, *a, **k)
    field = panel.dataset_actions.widget.folder
    field.setFocus()
    qtbot.waitUntil(field.hasFocus, timeout=2000)
    field.setText(str(data))
    qtbot.keyClick(field, Qt.Key_Return)
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=10000)
    assert scans == ["scan"] and panel.controls.start_button.isEnabled(), panel.controls.start_button.toolTip()
    panel.controls.start_button.setFocus()  # what the click on Start does first
    qtbot.waitUntil(lambda: not field.hasFocus(), timeout=2000)
    assert scans == ["scan"] and panel.controls.start_button.isEnabled()  # no second scan: the click would count
    other = make_dataset(tmp_path / "other", per_class=6)
    field.setFocus()
    field.setText(str(other))
    panel.controls.start_button.setFocus()  # typed, then left: scanned
    qtbot.waitUntil(lambda: scans == ["scan", "scan"], timeout=2000)


# -- item 6 (training side) and the fresh run name of item 2 ---------------------------------------------------------

def test_a_run_pauses_visibly_updates_its_history_line_and_leaves_a_fresh_name(window, qtbot, tmp_path):
    """Pause shows Paused in label, progress and history line; history updates each epoch with best val; finished line;
    results table fits at 1280×720, no legend on curves; a fresh run name afterwards. [window] [fine-tune] While paused
    the status shows no ETA (it stayed on: the walk).
    """
    from vitstudio.core.models.catalog import models_dir

    window.show_tab("training")
    panel = _scanned(window.training, qtbot, make_dataset(tmp_path / "data", per_class=12))
    panel.dataset.base_model.setEditText(SPEC3)
    panel.form.preset.setCurrentText("scratch")
    panel.form.inputs["epochs"].setValue(6)
    panel.form.inputs["batch_size"].setValue(8)
    first = panel.dataset.run_name.text()
    assert first.startswith("data-scratch-") and panel.controls.start_button.isEnabled()
    panel.start()
    assert not panel.controls.start_button.isEnabled() and "in progress" in panel.controls.start_button.toolTip()
    qtbot.waitUntil(lambda: len(panel.shown.epochs["epoch"]) >= 1, timeout=60000)
    panel.controls.pause_button.setChecked(True)
    assert panel.controls.paused_label.isVisible() and panel.controls.progress.format().startswith("Paused")
    assert "ETA" not in panel.controls.status.text()  # nothing counts down while paused (the walk)
    line = _history_line(panel, first)
    assert " · paused · " in line
    qtbot.wait(300)
    epochs_when_paused = len(panel.shown.epochs["epoch"])
    assert f" · {epochs_when_paused} epochs · " in _history_line(panel, first)
    panel.controls.pause_button.setChecked(False)
    assert not panel.controls.paused_label.isVisible() and not panel.controls.progress.format().startswith("Paused")
    qtbot.waitUntil(lambda: len(panel.shown.epochs["epoch"]) >= epochs_when_paused + 2, timeout=60000)
    live = panel.live.epochs
    line, done = _history_line(panel, first), len(live["epoch"])  # read in one turn of the event loop
    assert f" · training… · {done} epochs · best val {max(live['val_acc']) * 100:.1f} % · " in line  # each epoch
    qtbot.waitUntil(lambda: panel.job.done, timeout=60000)
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=20000)
    assert "6 epochs" in _history_line(panel, first)
    assert panel.controls.progress.format() == "finished · 6 epochs"
    # at 1280×720 the results' five columns fit beside the matrix, and no legend box sits on the curves
    window.resize(1280, 720)
    panel.right.setCurrentWidget(panel.results)
    qtbot.waitUntil(lambda: panel.results.table.rowCount() == 3, timeout=20000)
    qtbot.wait(50)
    table = panel.results.table
    assert table.horizontalHeader().length() <= table.viewport().width()
    assert all(plot.legend is None for plot in (panel.lines["train_loss"].getViewBox().parentItem(),
                                                panel.lines["train_acc"].getViewBox().parentItem()))
    second = panel.dataset.run_name.text()
    assert second != first and second.startswith("data-scratch-") and not (models_dir() / second).exists()
    assert panel.controls.start_button.isEnabled(), panel.controls.start_button.toolTip()


def test_the_chance_level_warning_follows_the_run(panel, qtbot, tmp_path):
    """The warning said during the run (accuracy at chance after two epochs) is replaced by each update with the new
    figure (it kept its first figure for the whole run: issue 29, item 11) and withdrawn once the run does better;
    other warnings of the run stay.

    [panel]
    """
    from vitstudio.core.train.engine import RunWarning

    panel = _scanned(panel(TrainingPanel), qtbot, make_dataset(tmp_path / "data", per_class=6))
    panel._on_record(RunWarning("Validation accuracy is still at chance level (33.3 % for 3 classes after 2 epochs).",
                                kind="chance level"))
    panel._on_record(RunWarning("Class red has 6 images, class blue 60: the classes are imbalanced."))
    assert panel.controls.warning.isVisibleTo(panel) and "after 2 epochs" in panel.controls.warning.text()
    panel._on_record(RunWarning("Validation accuracy is still at chance level (35.0 % for 3 classes after 3 epochs).",
                                kind="chance level", update=True))
    text = panel.controls.warning.text()
    assert text.count("chance level") == 1 and "after 3 epochs" in text and "imbalanced" in text
    panel._on_record(RunWarning("", kind="chance level", update=True))
    assert "chance level" not in panel.controls.warning.text() and "imbalanced" in panel.controls.warning.text()
    assert panel.controls.warning.isVisibleTo(panel)


def _history_line(panel, name: str) -> str:
    return next(panel.history.item(i).text() for i in range(panel.history.count())
                if panel.history.item(i).text().startswith(name + " · "))


# -- item 3: fits a 1280×720 screen ---------------------------------------------------------------------------------

def test_the_window_fits_1280_by_720_with_the_model_card_shown(window, qtbot):
    """With the model card shown the minimum size fits 1280×700; every tab page scrolls rather than being squeezed;
    `show_tab(name)` shows each tab's own panel; run controls stay visible. [window]
    """
    from vitstudio.core.models.demo import bundled_demo

    with qtbot.waitSignal(window.state.model_loaded, timeout=60000):
        window.request_model(str(bundled_demo()), "cpu", "fp32")
    card = next(d for d in window.findChildren(QScrollArea) if d.widget() is window.card_view)
    assert card.isVisible() and window.card_view.form.rowCount() > 5
    hint = window.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 700, hint
    window.resize(1280, 720)
    qtbot.waitUntil(lambda: window.width() == 1280 and window.height() == 720, timeout=5000)
    for i in range(window.tabs.count()):
        window.tabs.setCurrentIndex(i)
        qtbot.wait(20)
        page = window.tabs.currentWidget()
        area = _scroll_area_of(page)
        # the page is never squeezed below what it needs: it scrolls instead (and shows no bar when it fits)
        assert page.width() >= page.minimumSizeHint().width() and page.height() >= page.minimumSizeHint().height()
        assert area.viewport().width() > 700, window.tabs.tabText(i)
    from vitstudio.gui.main_window import TABS

    for attr, _ in TABS:  # callers still see the panels, not the scroll areas (test_play_tab's panel: this tab's)
        window.show_tab(attr)
        assert window.tabs.currentWidget() is getattr(window, attr), attr
    window.show_tab("training")
    qtbot.wait(50)
    controls = window.training.controls
    for button in (controls.start_button, controls.pause_button, controls.cancel_button):
        assert not button.visibleRegion().isEmpty()  # the run controls stay on screen beside a scrolled form


def test_the_progress_bar_is_the_whole_run(panel):
    """The afternoon walk: at "epoch 3/60 · step 3/4" the bar was 75 % full (it counted the epoch's steps).

    At epoch 18/60, step 1/4 the bar is (17·4+1)/240 full, not a quarter (it filled again every epoch: the afternoon
    walk). [panel]
    """
    from vitstudio.core.train.engine import StepProgress

    panel = panel(TrainingPanel)
    panel.controls.show_step(StepProgress(epoch=17, epochs=60, step=1, steps=4, loss=0.5, lr=1e-3, img_per_s=10.0,
                                          eta_s=100.0), None)
    bar = panel.controls.progress
    assert bar.value() / bar.maximum() == (17 * 4 + 1) / 240
    assert bar.text().startswith("epoch 18/60 · step 1/4")


def test_what_a_run_starts_from_is_the_tabs_state(panel, qtbot, monkeypatch, tmp_path):
    """The base model, run name, probe image and multi-GPU switch are fields of the Training state, each bound to its
    control both ways (they were read from the widgets); a run name is followed as it is typed, a probe chosen in
    the dialog reaches the field, and the run's config is built from the fields.

    [panel]
    """
    from vitstudio.gui import file_dialogs

    panel = panel(TrainingPanel)
    vs = panel.view_state
    panel.dataset.base_model.setEditText(SPEC3)
    assert vs.base_model == SPEC3 and panel._base_model() == SPEC3
    panel.dataset.run_name.setText("typed")  # no Return, no focus change: the state has it (F5 starts with it)
    assert vs.run_name == "typed"
    vs.update(run_name="from-the-state", base_model=TINY_SPEC)
    assert (panel.dataset.run_name.text(), panel.dataset.base_model.currentText()) == ("from-the-state", TINY_SPEC)
    probe = tmp_path / "probe.png"
    monkeypatch.setattr(file_dialogs, "open_file", lambda *_args: str(probe))
    panel.dataset._browse_probe()
    assert vs.probe == str(probe)
    panel.controls.multi_gpu.setChecked(True)
    assert vs.multi_gpu
    panel.set_dataset(str(make_dataset(tmp_path / "data", per_class=4)))
    qtbot.waitUntil(lambda: panel.dataset_actions.scan is not None, timeout=20000)
    vs.update(run_name="named")
    config = panel._run_config()
    assert (config.model, Path(config.out_dir).name, config.probe_image) == (TINY_SPEC, "named", str(probe))
