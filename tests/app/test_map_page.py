"""The Folder tab's Map page model (app/pages/map.py), without Qt: what it shows follows the Folder model's events
(the points, the colouring, the rows selected on it, the quick head); a drag, a lasso and a click go to the Folder
model and the App's one selection; nothing of earlier results stays."""

from __future__ import annotations

import numpy as np

from vitstudio.app.app import App
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.pages import page_entries
from vitstudio.core.models.demo import bundled_demo, render_digits


def test_the_map_page_follows_the_folder_and_forgets_earlier_points_before_the_new_map(tmp_path):
    """The Map page is the first Explore page (rank 10); its points are the Folder model's map of the results; a box
    dragged and a lasso drawn select the points inside them (checked against the coordinates by hand) and the table's
    rows follow; a point clicked is the App's current image; the quick head fitted on two labelled classes colours
    it and asks for the page to be shown, until a colouring is chosen; another folder's results leave no point, head
    or pointed image of the first, before its own map is ready."""
    app = App(ScriptRunner())
    app.load_model(str(bundled_demo()))
    page, folder, heard, shown = app.pages["map"], app.folder, [], []
    assert [e.id for e in page_entries() if e.group == "Explore"][0] == "map" and page.title == "Map"
    page.changed.connect(heard.append)
    page.show_requested.connect(lambda: shown.append(True))
    folder.open_paths([str(render_digits(tmp_path / "digits", 2))])
    coords = page.coords
    assert coords is folder.coords and coords.shape == (len(folder.results), 2) and heard[-1] == "points"
    lo, hi = coords.min(0), coords.max(0)
    middle = (lo + hi) / 2
    page.move_box(float(lo[0]), float(lo[1]), float(middle[0] - lo[0]), float(middle[1] - lo[1]))
    in_box = np.flatnonzero((coords[:, 0] <= middle[0]) & (coords[:, 1] <= middle[1]))
    assert 0 < len(in_box) < len(coords) and page.selected().tolist() == in_box.tolist() == folder.rows.tolist()
    square = [(middle[0], lo[1] - 1), (hi[0] + 1, lo[1] - 1), (hi[0] + 1, middle[1]), (middle[0], middle[1])]
    page.select_lasso(np.array(square))
    in_lasso = np.flatnonzero((coords[:, 0] > middle[0]) & (coords[:, 1] < middle[1]))
    assert len(in_lasso) and page.selected().tolist() == in_lasso.tolist() == folder.rows.tolist()
    page.pick(int(in_lasso[0]))
    assert folder.selected == in_lasso[0] and app.selection.current.path == folder.results.paths[in_lasso[0]]
    page.point(3)
    assert page.pointed == 3 and heard[-1] == "pointed"

    paths = folder.results.paths
    app.labels.apply({p: ("zero" if "/0/" in p else "one") for p in paths if "/0/" in p or "/1/" in p})
    assert app.labels.train() and page.head is app.labels.head is not None and shown == [True]
    assert heard[-1] == "colours"
    folder.state.colour_by = "tag"
    assert page.head is None and heard[-1] == "colours"
    app.labels.train()

    before_map = []
    folder.results_changed.connect(lambda _r: before_map.append((page.coords, page.head, page.pointed)))
    folder.open_paths([str(render_digits(tmp_path / "more", 1))])
    assert len(before_map) == 2 and set(before_map) == {(None, None, None)}  # forgotten, then the new results
    assert page.coords is folder.coords and len(page.coords) == len(folder.results) != len(paths)
