"""Selecting on the Folder map without Qt (issue 50 item 3): the lasso's point-in-polygon rule against matplotlib's
`Path.contains_points`, and the Folder model's rows following an outline drawn on its map."""

from __future__ import annotations

import numpy as np
from matplotlib.path import Path

from vitstudio.app.app_state import AppState
from vitstudio.app.folder_model import FolderModel
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.map_selection import counts_inside, rows_in_polygon
from vitstudio.core.folder.results import FolderResults


def test_the_lasso_holds_what_matplotlibs_path_holds_on_random_outlines():
    """`rows_in_polygon` equals matplotlib's `Path.contains_points` on 30 random outlines over 4,000 points (star-shaped
    ones and self-crossing ones: the even-odd rule), holding > 10,000 points in all; two vertices hold nothing; the
    legend's counts per colour group within a selection equal a hand count.
    """
    rng = np.random.default_rng(0)
    points = rng.normal(size=(4000, 2))
    held = 0
    for trial in range(30):
        m = int(rng.integers(3, 40))
        if trial % 2:  # star-shaped: vertices sorted by angle round a centre
            angles = np.sort(rng.uniform(0, 2 * np.pi, m))
            outline = rng.normal(size=2) * 0.5 + rng.uniform(0.3, 2.5, (m, 1)) * np.c_[np.cos(angles), np.sin(angles)]
        else:  # any vertices in any order: the outline crosses itself
            outline = rng.normal(size=(m, 2)) * 1.5
        expected = np.flatnonzero(Path(outline).contains_points(points))
        np.testing.assert_array_equal(rows_in_polygon(points, outline), expected)
        held += len(expected)
    assert held > 10000  # the outlines held points (a test over empty selections checks nothing)
    assert rows_in_polygon(points, outline[:2]).size == 0  # two vertices enclose nothing
    groups = [np.array([0, 1, 2, 5]), np.array([3, 4])]
    assert counts_inside(groups, np.array([1, 4, 5, 9])) == [2, 1]
    assert counts_inside(groups, None) == [4, 2]


def test_an_outline_on_the_folder_map_filters_its_rows():
    """`FolderModel.select_lasso` turns "follow the map" on and leaves the rows inside the outline (matplotlib's Path on
    the same points), announced by `rows_changed`; the confidence filter holds within it; not following the map, every
    row the filters leave.
    """
    folder = FolderModel(AppState(), ScriptRunner())
    rng = np.random.default_rng(1)
    n = 500
    folder.results = FolderResults(paths=tuple(f"/d/{i}.png" for i in range(n)), given=("a",) * n,
                                   predicted=rng.integers(0, 2, n), confidence=rng.uniform(0, 1, n),
                                   margin=rng.uniform(0, 1, n), labels=("a", "b"))
    folder.coords = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    seen = []
    folder.rows_changed.connect(seen.append)
    triangle = np.array([[-1.0, -1.0], [1.0, -1.0], [0.0, 1.0]])
    folder.select_lasso(triangle)
    inside = np.flatnonzero(Path(triangle).contains_points(folder.coords.astype(np.float64)))
    assert 100 < len(inside) < n and folder.state.follow_map  # the outline is a filter: the table follows it
    np.testing.assert_array_equal(folder.rows, inside)
    np.testing.assert_array_equal(seen[-1], inside)
    folder.state.min_conf = 0.5  # the other filters hold within it
    np.testing.assert_array_equal(folder.rows, inside[folder.results.confidence[inside] >= 0.5])
    folder.state.follow_map = False  # not following the map: every row the filters leave
    assert folder.selected_on_map() is None and len(folder.rows) == (folder.results.confidence >= 0.5).sum()
