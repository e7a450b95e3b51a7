"""A run's Results belong to their model: an image clicked in them is explained by that run's model (loaded on
demand, named in the window title), never by whatever model happens to be loaded."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset
from tests.gui.test_training_panel import _setup, _training_tab
from vitstudio.gui import workers


def test_results_open_in_the_runs_model(window, qtbot, tmp_path, tiny_weights):
    """Clicking a misclassified image in a run's results loads that run's model (named in the window title), selects the
    image in Attention; clicking again does not reload. The switch is said in the status bar's notice, naming the run
    and the model it replaced, with "Back to …", which loads that model again (the switch was silent: issue 49 item 11).
    [window] [fine-tune]
    """
    data = make_dataset(tmp_path / "data", per_class=10)
    panel = _setup(_training_tab(window), qtbot, data, epochs=1)  # a 3-class scratch run (the Training tests')
    panel.start()
    qtbot.waitUntil(lambda: panel.job is not None and panel.job.done, timeout=60000)
    qtbot.waitUntil(lambda: panel.results.report is not None and not workers.running_jobs(), timeout=30000)
    run = panel.view_state.run
    assert run and Path(run, "status.json").exists()

    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):  # the user moves on to another model
        window.request_model(TINY_SPEC, "cpu", "fp32", str(tiny_weights[0]))
    other = window.state.model
    image = str(next((data / "red").iterdir()))
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        panel.results.misclassified_clicked.emit(image)
    loaded = window.state.model
    assert loaded is not other and Path(loaded.name).resolve() == Path(run).resolve()
    assert loaded.labels == ["blue", "green", "red"]
    assert Path(run).name in window.windowTitle()
    qtbot.waitUntil(lambda: window.state.selected is not None and window.state.selected.path == image, timeout=10000)
    assert window.tabs.currentWidget() is window.attention

    # the switch is said where the user looks, with a way back
    notice = window.notice
    assert f"model that misclassified it, run {Path(run).name}, loaded in place of" in notice.text
    assert notice.action and f'<a href="open">Back to {other.display_name}</a>' in notice.label.text()

    # clicking again with the run's model loaded does not reload it
    loads = []
    window.state.model_loading.connect(loads.append)
    panel.results.misclassified_clicked.emit(image)
    qtbot.wait(200)
    assert loads == [] and window.state.model is loaded

    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):  # Back: the model it replaced, as loaded
        notice.label.linkActivated.emit("open")
    back = window.state.model
    assert back.name == other.name and back.weights_source == other.weights_source and not notice.text
