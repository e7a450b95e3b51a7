"""The switches row of the GUI seam matrix (issue 29), beyond the model and image switches of test_view_seams: another
folder on the Folder tab, another run in the Training tab's History. Every view a source fills is filled first, the
switch is made, and at that moment each view holds nothing of the first source (nothing a user would read as the new
one's, label, sort or export); once settled, the views that compute by themselves show the new source. The dataset
switch's cell is test_training_sources.test_another_dataset_shows_nothing_of_the_previous_run."""

from __future__ import annotations

import numpy as np

from tests.core.synthetic_data import make_dataset
from tests.gui.helpers import drag_on_map, open_in_folder_tab
from tests.gui.helpers import settle as _settle
from tests.gui.test_training_panel import SPEC3, _setup
from vitstudio.core.models.demo import render_digits
from vitstudio.core.train.runs import read_metrics
from vitstudio.gui.folder.folder_table import FIRST_SCORE
from vitstudio.gui.training.training_panel import TrainingPanel


def _folder_views(panel) -> dict[str, object]:
    """What each view of the Folder tab shows, in one comparable value each (empty: None, 0 or {})."""
    return {
        "table": panel.table_model.rowCount(),
        "results": None if panel.results is None else tuple(panel.results.paths),
        "map": len(panel.side.page("map").map.coords),
        "similar": panel.side.page("similar").list.count(),
        "review": panel.side.page("review").list.count(),
        "report": panel.report,
        "duplicates": panel.side.page("duplicates").count(),
        "fit": panel.fit.fit,
        "labels": dict(panel.app.labels.labels),
        "quick head": panel.app.labels.head,
        "layers": panel.side.page("layers").result,
        "gallery": panel.gallery.model().rowCount(),
        "lasso": len(panel.side.page("map").map.lasso._drawn),
        "legend's selection": 0 if (held := panel.side.page("map").map.selected) is None else len(held),
        "tags": sum(map(bool, panel.folder_tags.tags)),
        "tag filter": panel.view_state.tag,
        "paint": len(_paint_page(panel).model.paint.masks),
        "painted image": _paint_page(panel).canvas.picture is not None,
        "its segmentation": _paint_page(panel).model.shown,
        "export": panel.export_menu.count,  # what Export… would take (its label counts it)
        "scores": panel.folder_model.scores,
        "score columns": sum(bool(panel.table_model.data(panel.table_model.index(i, FIRST_SCORE)))
                             for i in range(panel.table_model.rowCount())),
        "score colour bar": panel.side.page("map").map.colour_bar.isVisible(),
    }


def _paint_page(panel):
    from vitstudio.gui.folder.pages.paint_page import PaintPage

    return next(p for p in panel.side.pages if isinstance(p, PaintPage))


def _paint_selected(panel) -> None:
    """Background along the selected image's top row, object across its middle: it is segmented from them."""
    model = _paint_page(panel).model
    model.paint.state.update(radius=1, brush_class=0)
    model.press(0, 0)
    model.drag(31, 0)
    model.release()
    model.paint.state.update(brush_class=1)
    model.press(8, 16)
    model.drag(24, 16)
    model.release()


def _lasso_and_tag(panel) -> None:
    """An outline drawn on the map round the middle of the points, its images tagged, the table filtered by the tag."""
    panel.side.setCurrentWidget(panel.side.page("map"))
    panel.side.page("map").lasso_button.click()
    centre, spread = panel.coords.mean(0), panel.coords.std(0)
    drag_on_map(panel.side.page("map").map,
                [centre + spread * (np.cos(a), np.sin(a)) for a in np.linspace(0, 2 * np.pi, 24)])
    panel.folder_tags.tag(panel.folder_model.selected_on_map(), "seen")
    panel.view_state.tag = "seen"


def test_another_folder_leaves_nothing_of_the_first_in_any_folder_view(window, qtbot, tmp_path):
    """The Folder tab's twenty views filled from one folder (table, results, map, similar images, label review and its
    report, duplicate groups, model fit, labels, quick head, layer probes, the Paint page's paint, image and its
    segmentation, and issue 50's gallery, lasso outline drawn by a mouse drag, the legend's selection, the tags put on
    it, the Tag filter, what Export… would take, the brain's scores, their table column and the map coloured by
    uniqueness (its colour bar); the Paint page's segmentation over the Attention tab's image, its toggle on, drawn for
    the strip's image); the moment another folder is opened each is empty, and once settled the table and map hold the
    second folder's 20 images, its fit is computed, its own labels file is open and its own scores fill the column and
    colour the map. [window]
    """
    first = render_digits(tmp_path / "first", per_class=3)
    second = render_digits(tmp_path / "second", per_class=2)
    open_in_folder_tab(window, qtbot, first)
    panel = window.folder
    panel.select_row(0)  # similar images
    panel.start_review()  # label review and duplicate groups
    labelled = list(panel.results.paths[:4])
    panel.app.labels.label(labelled[:2], "round")
    panel.app.labels.label(labelled[2:], "straight")
    panel.side.page("labels").train_button.click()  # the quick head colours the map
    panel.side.page("layers").run_button.click()  # probes of every block
    _settle(qtbot)
    _paint_selected(panel)  # the Paint page: the selected image painted and segmented
    window.add_paths([panel.results.paths[1]])  # the Attention tab's image: the paint's segmentation over it
    qtbot.waitUntil(lambda: window.state.selected is not None, timeout=10000)
    over_attention = window.attention.paint_segmentation
    over_attention.toggle.setChecked(True)
    _settle(qtbot)
    assert over_attention.model.result[0].image == window.state.selected.path
    _lasso_and_tag(panel)
    panel.view_state.colour_by = "uniqueness"  # the brain's scores: the table's columns, the map's colours
    filled = {**_folder_views(panel), "paint over attention": over_attention.item.image is not None}
    assert all(value not in (None, 0, {}) for value in filled.values()), filled
    first_labels = panel.app.labels.path

    panel.open_folder(str(second))
    now = {**_folder_views(panel), "paint over attention": over_attention.item.image is not None}
    stale = {view: value for view, value in now.items() if value not in (None, 0, {})}
    assert not stale, f"views still showing {first.name} after {second.name} was opened: {stale}"
    assert panel.app.labels.path != first_labels

    _settle(qtbot)
    assert panel.table_model.rowCount() == len(panel.results) == len(panel.side.page("map").map.coords) == 20
    assert all(str(path).startswith(str(second)) for path in panel.results.paths)
    assert panel.fit.fit is not None and panel.side.page("layers").run_button.isEnabled()
    assert panel.folder_model.scores.paths == panel.results.paths and panel.side.page("map").map.colour_bar.isVisible()
    table = panel.table_model
    assert all(table.data(table.index(i, FIRST_SCORE)) for i in range(20))  # the second's own scores
    assert panel.app.labels.path not in (None, first_labels) and not panel.app.labels.labels  # the second's own file


def _run(root, name: str, epochs: int, classes: dict) -> object:
    from tests.core.generators import drain
    from vitstudio.core.train.engine import fine_tune
    from vitstudio.core.train.recipes import make_config

    data = make_dataset(root / f"data-{name}", per_class=3, classes=classes)
    config = make_config(str(data), SPEC3, str(root / name), "scratch", epochs=epochs, batch_size=4, img_size=32)
    drain(fine_tune(config))
    return root / name


def test_another_run_in_the_history_leaves_nothing_of_the_first_on_screen(panel, qtbot, tmp_path):
    """Run A trained in the panel (with a warning of its own), then run B (other classes, other epochs) clicked in
    the History: the curves, the learning rate, the results, the progress bar, the status line and the warnings are
    B's alone.

    Run A trained in the panel with a warning, run B (other classes, 2 epochs) clicked in History: curves, learning
    rate, results, bar, status line are B's and A's warning is hidden (it stayed on screen under B: fixed, the warnings
    are of the run they were raised for), and shown again when A is clicked. [fine-tune]
    """
    from tests.core.synthetic_data import COLOURS

    a_classes = dict(list(COLOURS.items())[:3])
    b_classes = dict(list(COLOURS.items())[:2])
    run_b = _run(tmp_path, "run-b", 2, b_classes)
    panel = _setup(panel(TrainingPanel), qtbot, make_dataset(tmp_path / "data-a", per_class=3, classes=a_classes),
                   epochs=1)
    panel.start()
    qtbot.waitUntil(lambda: panel.job is not None and panel.job.done and panel.results.report is not None,
                    timeout=60000)
    run_a = panel.shown_run
    panel.controls.show_warning("Validation accuracy is at chance level (run A).", "chance level")
    assert panel.results.report.classes == tuple(a_classes) and len(panel.shown.epochs["epoch"]) == 1

    panel.show_run(run_b)
    assert panel.shown.epochs["epoch"] == [row["epoch"] + 1 for row in read_metrics(run_b)] == [1, 2]
    assert panel.results.report is None or panel.results.report.classes == tuple(b_classes)
    assert run_a.name not in panel.controls.progress.format() and run_b.name in panel.controls.progress.format()
    assert run_b.name in panel.controls.status.text() and run_a.name not in panel.controls.status.text()
    assert not panel.controls.shown_warnings() and not panel.controls.warning.isVisibleTo(panel)  # A's, not B's
    assert max(epoch for epoch, _lr in panel.shown.lr) <= 2
    _settle(qtbot)
    assert panel.results.report.classes == tuple(b_classes)
    assert panel.export_data()[2]["run"] == str(run_b)
    panel.show_run(run_a)  # back to A: its warning is there again
    assert panel.controls.shown_warnings() == ["Validation accuracy is at chance level (run A)."]
