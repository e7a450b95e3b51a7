"""The one selection (vitstudio/app/selection.py), driven from a script with no Qt: a folder row picked is the image
every model that shows "the image" follows, and the strip's image picked is the folder's row when it is one of the
folder's files."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from vitstudio.app.app import App
from vitstudio.app.app_state import make_entry
from vitstudio.app.jobs import ScriptRunner
from vitstudio.core.models.demo import bundled_demo


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("picked")
    pixels = np.random.default_rng(1).integers(0, 255, (6, 32, 32, 3), np.uint8)
    for i in range(6):
        (root / str(i % 2)).mkdir(exist_ok=True)
        Image.fromarray(pixels[i]).save(root / str(i % 2) / f"{i}.png")
    return root


def _shown_everywhere(app: App) -> set:
    """What each of the app's models that shows one image is showing."""
    return {app.state.selected.path, app.match.path_a, app.pages["paint"].image, app.selection.state.path}


def test_a_row_picked_anywhere_is_the_image_of_every_view_and_the_strip_picks_the_row(folder, tmp_path):
    """A folder row picked (table, gallery, map all call FolderModel.select) becomes the strip's entry, read once and
    selected: the explorers (AppState.selected), Match's image A, the Paint page and the selection name that file.
    Picking another row replaces it everywhere; picking the first one's strip entry selects its row again (no second
    entry); an image outside the folder picked in the strip leaves the folder's row alone."""
    app = App(ScriptRunner())
    app.load_model(str(bundled_demo()))
    app.folder.open_paths([str(folder)])
    paths = app.folder.results.paths
    app.folder.select(2)
    assert _shown_everywhere(app) == {paths[2]} and app.selection.state.source == "folder"
    first = app.state.selected
    app.folder.select(4)
    assert _shown_everywhere(app) == {paths[4]}
    assert [e.path for e in app.state.images] == [paths[2], paths[4]]
    app.state.select(first)  # the strip's image: the folder's row follows, nothing read again
    assert app.folder.selected == 2 and _shown_everywhere(app) == {paths[2]}
    assert app.selection.state.source == "strip" and len(app.state.images) == 2
    outside = tmp_path / "outside.png"
    Image.new("RGB", (32, 32), (9, 9, 9)).save(outside)
    app.state.add_images([make_entry(str(outside), Image.open(outside).convert("RGB"))])
    app.state.select(app.state.images[-1])
    assert app.folder.selected == 2 and app.selection.state.path == str(outside) and app.match.path_a == str(outside)


def test_an_unreadable_row_is_said_and_leaves_the_image_shown(folder, tmp_path):
    """A folder row whose file cannot be read any more joins the strip marked unreadable (the app says why) and the
    image shown stays the one before."""
    app = App(ScriptRunner())
    said = []
    app.state.message.connect(lambda level, text: said.append(text))
    app.load_model(str(bundled_demo()))
    app.folder.open_paths([str(folder)])
    app.folder.select(0)
    shown = app.state.selected.path
    broken = app.folder.results.paths[1]
    original = open(broken, "rb").read()
    try:
        open(broken, "wb").write(b"not a png")
        app.folder.select(1)
    finally:
        open(broken, "wb").write(original)
    assert app.state.selected.path == shown and any(broken in text for text in said)
    assert app.state.images[-1].error is not None


def test_the_rows_selected_are_the_apps_with_where_they_were_chosen_and_go_with_the_results(folder, tmp_path):
    """The folder's multi-selection is the App's (`selection.rows`): kept in results order without repeats, with the
    view it was chosen in (none once empty); what a "selected only" sort or a tag acts on is read there; another
    folder's results leave none of it."""
    app = App(ScriptRunner())
    app.load_model(str(bundled_demo()))
    app.folder.open_paths([str(folder)])
    heard = []
    app.selection.state.events.rows.connect(heard.append)
    assert app.selection.rows == [] and app.selection.state.rows_source == ""
    app.selection.select_rows([4, 1, 4], "gallery")
    assert app.selection.rows == [1, 4] and app.selection.state.rows_source == "gallery" and heard == [(1, 4)]
    app.selection.select_rows([], "table")
    assert app.selection.rows == [] and app.selection.state.rows_source == ""
    app.selection.select_rows([2], "table")
    app.folder.open_paths([str(tmp_path)])  # another folder (empty): its rows are other images
    assert app.selection.rows == [] and app.selection.state.rows_source == ""
