"""A model with no classes yet (a CLIP-style model before the Classes box, or any headless ViT) through the views a
tester found broken: the Folder tab opened it and stopped (IndexError per row, controls stuck, a segfault drawing
offscreen), Predictions said "Classifying…" forever; and the Classes box forgot a model's classes on reload."""

from __future__ import annotations

import csv

import numpy as np

from tests.core.synthetic_data import make_dataset
from tests.gui.helpers import load_in_window
from vitstudio.gui import workers


def test_the_folder_tab_shows_a_headless_model_without_predictions(window, qtbot, clip_dir, tmp_path, monkeypatch):
    """Folder opens with 18 rows, empty prediction/confidence cells, given labels, "no classes", sort disabled, Export…
    → CSV of every column enabled with empty predictions, colour by given label; once classes are applied it reopens
    with predictions. [window]
    """
    data = make_dataset(tmp_path / "colours", per_class=6, size=40)
    loaded = load_in_window(window, qtbot, str(clip_dir))
    assert loaded.labels == []
    window.show_tab("folder")
    panel = window.folder
    panel.open_folder(str(data))
    qtbot.waitUntil(lambda: panel.results is not None and panel.coords is not None, timeout=60000)
    results = panel.results
    assert len(results) == 18 and not results.has_predictions and panel.table_model.rowCount() == 18
    row = [panel.table_model.data(panel.table_model.index(0, c)) for c in range(1, 6)]
    assert row[1] == "" and row[2] == "" and row[3] in ("blue", "green", "red")  # no prediction, the given label
    assert "no classes" in panel.info.text() and not panel.toolbar.sort_button.isEnabled()
    assert panel.toolbar.export_button.isEnabled()  # Export 18 images… → CSV of every column: no prediction in it
    monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getSaveFileName",
                        lambda *a, **k: (str(tmp_path / "rows.csv"), ""))
    panel.export_menu.actions["table"].trigger()
    qtbot.waitUntil(lambda: (tmp_path / "rows.csv").exists(), timeout=30000)
    rows = list(csv.DictReader(open(tmp_path / "rows.csv", encoding="utf-8-sig")))
    assert len(rows) == 18 and all(r["predicted"] == "" and r["confidence"] == "" for r in rows)
    assert len(panel.visible_rows()) == 18  # the confidence floor has nothing to hide
    colour_by = panel.side.page("map").colour_by
    assert panel.folder_model.colour_key() == "given label" == colour_by.currentText()  # no prediction to colour by
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)
    # classes given in words: the same model, so the folder opens again by itself, now with predictions
    box = window.model_panel.classes
    box.classes.setText("blue, green, red")
    with qtbot.waitSignal(window.state.model_loaded, timeout=60000):
        box.apply()
    qtbot.waitUntil(lambda: panel.results is not None and panel.results.has_predictions, timeout=60000)
    assert panel.toolbar.sort_button.isEnabled() and panel.results.predicted_label(0) in ("blue", "green", "red")
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)


def test_predictions_say_what_to_do_and_classes_come_back_on_reload(window, qtbot, clip_dir, photos, tmp_path):
    """Predictions title points to Classes (never "Classifying"); one class folder refused; applied classes and prompt
    come back on reload with probs summing to 1; an emptied box returns to no classes and stays so. [window]
    """
    window.add_paths([str(photos["chelsea"])])
    load_in_window(window, qtbot, str(clip_dir))
    window.show_tab("predictions")
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=30000)
    title = window.predictions.title.text()
    assert "Classes" in title and "Classifying" not in title
    assert window.predictions.crop.pixmap() is not None and not window.predictions.crop.pixmap().isNull()

    box = window.model_panel.classes
    (tmp_path / "one" / "only").mkdir(parents=True)
    assert not box.use_folder(tmp_path / "one") and "1 class folder" in box.status.text()
    box.classes.setText("a cat, a rocket")
    box.prompt.setText("{}")
    with qtbot.waitSignal(window.state.model_loaded, timeout=60000):
        box.apply()
    assert window.state.model.labels == ["a cat", "a rocket"]
    # loaded again (as after a restart): the box gives the model its classes and prompt back by itself
    with qtbot.waitSignals([window.state.model_loaded, window.state.model_loaded], timeout=60000):
        window.request_model(str(clip_dir), "cpu", "fp32", None)
    assert window.state.model.labels == ["a cat", "a rocket"] and box.prompt.text() == "{}"
    qtbot.waitUntil(lambda: window.state.prediction_for(window.state.selected) is not None, timeout=60000)
    probs = window.state.prediction_for(window.state.selected).probs
    assert np.isclose(sum(probs), 1.0, atol=1e-5)
    # an empty box: back to the model without classes, and it is not given them again on the next load
    box.classes.clear()
    with qtbot.waitSignal(window.state.model_loaded, timeout=10000):
        box.apply()
    assert window.state.model.labels == [] and "Classes" in window.predictions.title.text()
    headless = load_in_window(window, qtbot, str(clip_dir))
    qtbot.waitUntil(lambda: not workers.running_jobs(), timeout=30000)
    assert headless.labels == [] and window.state.model is headless and box.status.text() == "no classes yet"
