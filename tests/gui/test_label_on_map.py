"""Label an unlabelled folder in the Folder tab (issue 22 item 3): the selection labelled as two classes (Label
as… and a number key), Train colours the map by the quick head's predictions, a labelling is undone, the labels
are back after a restart, and the image folder is never written."""

from __future__ import annotations

import shutil

import numpy as np
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtWidgets import QInputDialog

from tests.core.synthetic_data import tree_state
from tests.gui.helpers import settle as _settle
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.core.train.labelling import class_order, default_labels_path, load_labels
from vitstudio.gui import workers


def _unlabelled_folder(tmp_path):
    """Twelve zeros and twelve ones in one flat folder, named so nothing gives their class away."""
    digits = render_digits(tmp_path / "digits", per_class=12)
    flat = tmp_path / "unlabelled"
    flat.mkdir()
    truth = {}
    for digit in ("0", "1"):
        for src in sorted((digits / digit).iterdir())[:12]:
            dst = flat / f"img-{len(truth):03d}.png"
            shutil.copy(src, dst)
            truth[str(dst)] = "zero" if digit == "0" else "one"
    return flat, truth


def _open(window, qtbot, folder):
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))
    window.show_tab("folder")
    window.folder.open_folder(str(folder))
    _settle(qtbot)
    return window.folder


def _select(panel, paths):
    selection = panel.table.selectionModel()
    selection.clearSelection()
    for view_row in range(panel.table_model.rowCount()):
        if panel.results.paths[panel.table_model.rows[view_row]] in paths:
            selection.select(panel.table_model.index(view_row, 0),
                             QItemSelectionModel.Select | QItemSelectionModel.Rows)


def test_label_train_undo_and_restore(window, qtbot, tmp_path, monkeypatch):
    """Label as…/number keys label images (undoable, saved at once); Train's head ≥ 90 % right and recolours the map;
    Suggest gives 9 unlabelled; labels become the Training dataset; folder untouched; labels back after restart.
    [window] The buttons come before the lines that change length (a wrapped line moved Suggest next under the pointer),
    and Reset filters takes back "the table shows the 9 images to label next" (both: the walk). The table marks each
    labelled row: its label in bold as given (issue 29, item 12). The classes line reads "key 1: zero (6 images)   key
    2: one (4 images)" (a bold 1 beside a class named 2 read as a class); classes take keys in the order first given, so
    a new class renumbers none (sorted by name, adding "8" moved "9" from key 1 to key 2: the walk). At 1280×720 the
    map's title after Train fits the map's width (it was cut: item 12). Label as… offers its guess first: the model's
    top-1 while no class exists ("0" for four zeros), none that is not among the user's classes, the quick head's class
    once trained (the dialog pre-filled the first class: walk).
    """
    folder, truth = _unlabelled_folder(tmp_path)
    before = tree_state(folder)
    panel = _open(window, qtbot, folder)
    tab, labels = panel.side.page("labels"), window.app.labels
    zeros = [p for p, c in truth.items() if c == "zero"]
    ones = [p for p, c in truth.items() if c == "one"]

    offered = []  # (options, current) of each Label as…: what the model or the quick head guesses comes first
    for paths, name in ((zeros[:4], "zero"), (ones[:4], "one")):
        _select(panel, paths)
        monkeypatch.setattr(QInputDialog, "getItem", lambda _p, _t, _l, options, current, *a, name=name, **k:
                            offered.append((list(options), current)) or (name, True))
        tab.label_button.click()
    assert labels.labels == {p: truth[p] for p in zeros[:4] + ones[:4]}
    assert offered[0] == (["0"], 0)  # no class yet: the demo's top-1 for the four zeros
    assert offered[1] == (["zero"], 0)  # "1" is no guess among the user's own classes
    _select(panel, [])  # no rows selected: the map's box is the selection
    panel.folder_model.map_rows = np.asarray([panel.results.paths.index(p) for p in ones[4:6]])
    monkeypatch.setattr(QInputDialog, "getItem", lambda *a, **k: ("one", True))
    tab.label_button.click()
    assert all(labels.labels[p] == "one" for p in ones[4:6])
    panel.files.undo_stack.undo()  # (taken back: the rest of the test counts on the table's labels)
    assert not any(p in labels.labels for p in ones[4:6])
    panel.folder_model.map_rows = None
    _select(panel, zeros[4:6])
    panel.table.setFocus()
    qtbot.keyClick(panel.table, Qt.Key_1)  # classes in the order first given: 1 zero, 2 one
    assert all(labels.labels[p] == "zero" for p in zeros[4:6])
    assert load_labels(default_labels_path(folder)) == labels.labels  # kept in the data folder, at once
    # the keys and the classes told apart (a bold "1" beside a class named "2" read as a class: the walk)
    assert tab.classes.text() == "key <b>1</b>: zero (6 images)   key <b>2</b>: one (4 images)"
    # a class given later takes the next key and renumbers none (sorted by name, "one" would have moved: the walk)
    assert class_order({**labels.labels, "x.png": "a-first-by-name"})[:3] == ["zero", "one", "a-first-by-name"]
    # the table marks which rows are labelled: their label, in bold, as given (issue 29, item 12)
    model = panel.table_model
    for view_row in range(model.rowCount()):
        path = panel.results.paths[model.source_row(view_row)]
        index = model.index(view_row, 4)
        bold = model.data(index, Qt.FontRole)
        assert (bold is not None and bold.bold()) == (path in labels.labels), path
        assert model.data(index) == labels.labels.get(path, panel.results.given[model.source_row(view_row)])

    tab.train_button.click()
    qtbot.waitUntil(lambda: labels.head is not None, timeout=30000)
    head = labels.head
    predicted = {p: head.classes[head.predicted[i]] for i, p in enumerate(panel.results.paths)}
    assert all(predicted[p] == truth[p] for p in labels.labels)
    assert np.mean([predicted[p] == truth[p] for p in truth]) >= 0.9  # the unlabelled ones too
    # the head's guess, in the user's classes
    assert labels.guess(ones[6:9]) == "one" and labels.guess(zeros[6:9]) == "zero"
    legend = panel.side.page("map").map.legend.text()
    assert "zero" in legend and "one" in legend  # the map recoloured by the head's classes
    window.resize(1280, 720)  # the map's title fits its width there (it was cut: issue 29, item 12)
    qtbot.wait(50)
    plot = panel.side.page("map").map
    title = plot.plotItem.titleLabel
    assert title.item.boundingRect().width() <= plot.width(), (title.text, plot.width())
    assert panel.side.currentWidget() is panel.side.page("map")

    panel.files.undo_stack.undo()  # the number key's labelling
    assert zeros[4] not in labels.labels and len(labels.labels) == 8
    assert load_labels(default_labels_path(folder)) == labels.labels
    panel.files.undo_stack.redo()
    assert len(labels.labels) == 10

    tab.suggest_button.click()
    qtbot.waitUntil(lambda: panel.group_rows is not None, timeout=30000)
    suggested = {panel.results.paths[r] for r in panel.visible_rows()}
    assert len(suggested) == 9 and not suggested & set(labels.labels)  # only images not labelled yet
    assert "to label next" in tab.info.text()
    buttons = tab.layout().itemAt(0).layout()  # the buttons first: the lines below wrap without moving them
    assert buttons is not None and buttons.indexOf(tab.suggest_button) >= 0
    panel.toolbar.reset_button.click()
    assert "to label next" not in tab.info.text() and "labelled" in tab.info.text()  # said no more (the walk)
    tab.suggest_button.click()
    qtbot.waitUntil(lambda: panel.group_rows is not None, timeout=30000)
    tab.model_button.click()  # the labels file becomes the Training tab's dataset
    assert window.tabs.currentWidget() is window.training
    qtbot.waitUntil(lambda: window.training.dataset_actions.scan is not None, timeout=20000)
    assert window.training.dataset_actions.scan.classes == ("one", "zero")
    assert tree_state(folder) == before  # the image folder was only read

    from vitstudio.gui.main_window import MainWindow

    kept = dict(labels.labels)
    window.close()
    second = MainWindow()
    qtbot.addWidget(second)
    try:
        _open(second, qtbot, folder)
        assert second.app.labels.labels == kept  # back after a restart
    finally:
        workers.shutdown(5000)


def test_label_as_offers_the_class_folder_an_image_is_in(panel, qtbot, tmp_path):
    """The walk: in a folder of class folders, Label as… offered the model's guess, not the folder the images are
    in. The folder's class comes first (the model reads these digits as digits, the folders say otherwise); a flat
    folder names no class, so there the model's guess stays (test_label_train_undo_and_restore).

    [panel]
    """
    from vitstudio.gui.folder.folder_panel import FolderPanel

    digits = render_digits(tmp_path / "digits", per_class=6)
    named = tmp_path / "named"
    for digit, name in (("0", "alpha"), ("1", "beta")):
        shutil.copytree(digits / digit, named / name)
    panel = panel(FolderPanel, model=bundled_demo())  # the Folder tab alone
    panel.open_folder(str(named))
    _settle(qtbot)
    labels = panel.app.labels
    alphas = [p for p in panel.results.paths if "/alpha/" in p]
    assert panel.results.predicted_labels()[panel.results.paths.index(alphas[0])] == "0"  # the model: a digit
    assert labels.guess(alphas[:3]) == "alpha"
    labels.label(alphas[:2], "mine")  # a class of the user's own: the folder still names the others' class
    assert labels.guess(alphas[2:4]) == "alpha"


def test_label_as_prefills_the_rows_folder_not_the_previous_label(panel, qtbot, tmp_path, monkeypatch):
    """Issue 49 item 11: after labelling two images "mine", Label as… on rows in the folder "beta" pre-filled
    "mine", the previous label (the folder was no guess once a class of the user's own existed).

    [panel]
    """
    from vitstudio.gui.folder.folder_panel import FolderPanel

    digits = render_digits(tmp_path / "digits", per_class=3)
    named = tmp_path / "named"
    for digit, name in (("0", "alpha"), ("1", "beta")):
        shutil.copytree(digits / digit, named / name)
    folder = panel(FolderPanel, model=bundled_demo())
    folder.open_folder(str(named))
    _settle(qtbot)
    tab = folder.side.page("labels")
    alphas = [p for p in folder.results.paths if "/alpha/" in p]
    betas = [p for p in folder.results.paths if "/beta/" in p]
    folder.app.labels.label(alphas[:2], "mine")
    _select(folder, betas[:2])
    offered = []
    monkeypatch.setattr(QInputDialog, "getItem", lambda _p, _t, _l, options, current, *a, **k:
                        offered.append(options[current]) or ("", False))
    tab.label_button.click()
    assert offered == ["beta"]
