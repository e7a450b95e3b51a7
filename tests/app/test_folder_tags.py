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
from vitstudio.core.folder import view_select, views
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
    assert [str(p) for p in view_select.view_files(data, "kept")] == [files[i] for i in lassoed]
    with pytest.raises(ValueError, match="confidence"):
        view_select.view_files(data, "kept and sure")

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


def test_a_view_saved_in_the_tab_with_model_rules_is_applied_by_the_cli_with_the_model_it_was_saved_with(
        tmp_path, tiny_weights, capsys):
    """A view of the Folder tab's prediction and confidence filters records the model shown (spec and weights);
    `--view` on the command line without --model computes those columns with that model, says so in one line, and
    selects the rows the tab showed; with another --model it says the view was saved with another."""
    import json

    from tests.conftest import TINY_SPEC
    from vitstudio.cli import main
    from vitstudio.core.models.loading import load_model

    data = make_dataset(tmp_path / "data", per_class=3)
    app = AppState()
    app.request_model(TINY_SPEC, weights=str(tiny_weights[0]))  # the model bar's Load (loaded here, not by a job)
    app.set_model(load_model(TINY_SPEC, tiny_weights[0], "cpu", "fp32"))
    model = FolderModel(app, ScriptRunner())
    tags = FolderTags(model)
    model.open_paths([str(data)])
    results = model.results
    label = results.predicted_label(0)
    sure = sorted(results.confidence[[results.predicted_label(i) == label for i in range(len(results))]])
    cut = float(sure[len(sure) // 2]) if len(sure) > 1 else 0.0
    model.state.update(predicted=label, min_conf=cut)
    shown = [results.paths[r] for r in model.rows]
    assert 0 < len(shown) < len(results)
    tags.save_view("sure")
    assert views.saved_model(data, "sure") == (TINY_SPEC, str(tiny_weights[0]))

    capsys.readouterr()
    assert main(["predict", str(data), "--view", "sure", "--json", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert sorted(json.loads(line)["path"] for line in out.splitlines()) == sorted(shown)
    notes = [line for line in err.splitlines() if "view 'sure'" in line]
    assert notes == [f"note: the view 'sure' reads the predictions of {TINY_SPEC} (weights {tiny_weights[0]}), the "
                     f"model it was saved with (--model gives another)"]
    assert main(["views", str(data), "--json"]) == 0  # a listing loads no model: it names the one --view uses
    assert json.loads(capsys.readouterr().out)["sure"]["needs"] == (
        f"--model (rules on prediction, confidence; saved with {TINY_SPEC}, which --view uses)")
    other = ["--model", TINY_SPEC.replace("classes=5", "classes=3"), "--quiet"]
    assert main(["predict", str(data), "--view", "sure", "--json", *other]) in (0, 2)
    assert f"note: the view 'sure' was saved with {TINY_SPEC} (weights" in capsys.readouterr().err
