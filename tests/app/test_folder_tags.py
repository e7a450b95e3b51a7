"""Tags and saved views in the Folder tab's model without Qt (issue 50 item 4, `vitstudio/app/folder_tags.py`): a
lasso selection tagged, the filters saved as a view, a new session restores it by name, and the command line's
`--view` (the core's `view_files`) sees the same files."""

from __future__ import annotations

import numpy as np
import pytest

from tests.core.synthetic_data import make_dataset
from vitstudio.app.app_state import AppState
from vitstudio.app.folder_model import FolderModel
from vitstudio.app.folder_tags import FolderTags
from vitstudio.app.jobs import ScriptRunner
from vitstudio.core.folder import views
from vitstudio.core.folder.results import FolderResults


def _opened(folder, results, coords):
    """A new session's Folder model with `folder`'s results shown (as a scan delivers them) and its tags read."""
    model = FolderModel(AppState(), ScriptRunner())
    tags = FolderTags(model)
    model.folder, model.results, model.coords = str(folder), results, coords
    model.results_changed.emit(results)
    model.apply_filters()
    return model, tags


def test_a_tagged_lasso_saved_as_a_view_comes_back_after_a_restart_and_the_cli_sees_its_files(tmp_path):
    """A lasso's rows tagged `keep` (the Tag filter offers it), the tag and a confidence floor leave exactly the lassoed
    rows above it (computed in the test) and are saved as a view; Reset filters drops the tag filter; a new session
    reads the tags back and restores the view by name (tag, floor, rows); the core's `view_files` (what `--view`
    resolves) gives the tagged files of a tags-only view and, without a model, refuses one on the tab's columns naming
    the column; a view the command line saved on class folders is restored as rules the filters cannot hold and filters
    all the same, and an image tagged now leaves a `tags none` view at once.
    """
    data = make_dataset(tmp_path / "data", per_class=8)
    files = sorted(str(p) for p in data.rglob("*.png"))
    rng = np.random.default_rng(0)
    n = len(files)
    results = FolderResults(paths=tuple(files), given=tuple(f.split("/")[-2] for f in files),
                            predicted=rng.integers(0, 3, n), confidence=rng.uniform(0, 1, n),
                            margin=rng.uniform(0, 1, n), labels=("blue", "green", "red"))
    coords = rng.uniform(-1, 1, (n, 2))
    model, tags = _opened(data, results, coords)
    model.select_lasso([[-1, -1], [1, -1], [1, 1]])  # the lower-right half of the map
    lassoed = np.flatnonzero(coords[:, 0] > coords[:, 1])
    assert 4 < len(lassoed) < n - 4
    assert tags.tag(model.selected_on_map(), "keep") == len(lassoed)
    assert model.state.fields()["tag"].choices == (None, "keep")  # the Tag filter offers it
    model.state.update(follow_map=False, tag="keep", min_conf=0.3)
    expected = [i for i in lassoed if results.confidence[i] >= 0.3]
    assert model.rows.tolist() == expected and len(expected) >= 2
    tags.save_view("kept and sure")
    model.reset_filters()
    assert len(model.rows) == n  # the tag filter went with the others
    model.state.tag = "keep"
    tags.save_view("kept")

    again, tags_again = _opened(data, results, coords)  # a restart: the records are read back
    assert tags_again.tags == tags.tags and set(tags_again.views) == {"kept", "kept and sure"}
    tags_again.restore_view("kept and sure")
    assert (again.state.tag, again.state.min_conf, again.state.rules) == ("keep", 0.3, ())
    assert again.rows.tolist() == expected
    # the command line's --view resolves a view of tags to the same files; one on the tab's columns needs a model
    assert [str(p) for p in views.view_files(data, "kept")] == [files[i] for i in lassoed]
    with pytest.raises(ValueError, match="confidence"):
        views.view_files(data, "kept and sure")

    # a view the command line saved (class folders): restored as rules the filters cannot hold, filtering all the same
    views.save_view(data, "reds", [{"field": "label", "op": "in", "value": ["red"]},
                                   {"field": "tags", "op": "none", "value": ["keep"]}])
    tags_again.refresh_views()
    tags_again.restore_view("reds")
    assert again.state.tag is None and len(again.state.rules) == 2
    assert again.rows.tolist() == [i for i, f in enumerate(files) if "/red/" in f and i not in set(lassoed)]
    tags_again.tag([again.rows[0]], "keep")  # tagged now, it leaves the view at once: the view is its rules
    assert again.rows.tolist() == [i for i, f in enumerate(files) if "/red/" in f and i not in set(lassoed)][1:]


def test_a_moved_file_keeps_its_tags_in_the_tab_and_a_file_outside_the_folder_is_refused(tmp_path):
    """The Folder tab reads the tags by content when the folder's results come again: a file moved to another
    class folder behind the app's back shows its tags on its new row. A row outside the opened folder is refused
    as the command line refuses it (one line; nothing written)."""
    data = make_dataset(tmp_path / "data", per_class=2)
    files = sorted(str(p) for p in data.rglob("*.png"))
    stray = make_dataset(tmp_path / "stray", per_class=1) / "red" / "000.png"

    def results_of(paths):
        n = len(paths)
        return FolderResults(paths=tuple(paths), given=tuple(p.split("/")[-2] for p in paths),
                             predicted=np.zeros(n, np.int64), confidence=np.ones(n), margin=np.ones(n),
                             labels=("blue", "green", "red"))

    model, tags = _opened(data, results_of([*files, str(stray)]), np.zeros((len(files) + 1, 2)))
    tags.tag([0], "keep")
    with pytest.raises(ValueError, match="is not inside"):
        tags.tag([len(files)], "keep")
    moved = str(data / "red" / "was-blue.png")
    (data / files[0]).rename(moved)
    now = sorted([moved, *files[1:]])
    _, again = _opened(data, results_of(now), np.zeros((len(now), 2)))
    assert [now[i] for i, t in enumerate(again.tags) if t] == [moved] and again.tags[now.index(moved)] == {"keep"}
