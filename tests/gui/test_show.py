"""`vitstudio.show(...)`: the window opened from a script on a given App, model and images (napari's
`napari.Viewer()` habit); the App a script already drove shows what it holds."""

from __future__ import annotations

import vitstudio
from tests.gui.helpers import settle
from vitstudio.app.app import App
from vitstudio.app.jobs import ScriptRunner
from vitstudio.core.models.demo import bundled_demo, sample_images
from vitstudio.gui import workers


def test_show_opens_the_window_on_the_app_model_and_images_given(qtbot):
    """show(app, images=…, model=…, block=False) draws that very App: the model loads once, the images join the
    strip, the first is classified in the Predictions tab."""
    app = App(workers.QT_RUNNER, follow_loads=False)
    images = [str(p) for p in sample_images()[:2]]
    loads = []
    app.state.model_loading.connect(loads.append)
    window = vitstudio.show(app, images=images, model=str(bundled_demo()), block=False)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: app.model is not None and len(app.state.images) == 2, timeout=30000)
    settle(qtbot)
    assert window.app is app and loads == [str(bundled_demo())]
    assert window.predictions.shown_rows() and window.windowTitle() == f"ViT Studio — {app.model.display_name}"
    window.close()
    workers.shutdown(5000)


def test_an_app_a_script_drove_is_shown_as_it_is(qtbot, tmp_path):
    """A script's App (its own runner, its model loaded and a folder opened before any window) shown as it is: the
    window names its model and the Folder tab shows the folder's results, loaded once."""
    from vitstudio.core.models.demo import render_digits

    app = App(ScriptRunner())
    app.load_model(str(bundled_demo()))
    app.folder.open_paths([str(render_digits(tmp_path / "digits", 1))])
    loaded = app.model
    window = vitstudio.show(app, block=False)
    qtbot.addWidget(window)
    settle(qtbot)
    assert app.model is loaded and window.windowTitle() == f"ViT Studio — {loaded.display_name}"
    assert window.folder.table_model.rowCount() == len(app.folder.results) == 10
    window.close()
    workers.shutdown(5000)
