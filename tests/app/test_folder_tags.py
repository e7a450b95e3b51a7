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
