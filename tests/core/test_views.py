"""Tags and saved views (issue 50 item 4; core/folder/views.py, `vitstudio tag | views`, `--view NAME`): kept in the
app's records of the folder, a view is its rules (what matches now), and a command given a view sees exactly the
images it selects."""

from __future__ import annotations

import csv
import fnmatch
import json

import numpy as np
import pytest

from tests.conftest import TINY_SPEC
from tests.core.synthetic_data import make_dataset
from vitstudio.cli import main
from vitstudio.core.files import dataset_dir
from vitstudio.core.folder import view_select, views


def _tree(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_a_saved_view_is_its_rules_and_predict_sees_exactly_its_files(tmp_path, tiny_weights, capsys):
    """Three images tagged `keep` (one also `odd`, `second look`), a view saved as `tags any keep, none odd`: `predict
    --view` lists exactly its two images; a fourth tagged later joins it (rules, not a list; in the folder's order);
    `views --json` gives the rules and the count; the view as a labels file holds its images with their class folders
    (audit and finetune read it); the folder untouched, tags.json and views.json in the data folder.
    """
    data = make_dataset(tmp_path / "data", per_class=3)  # 3 class folders of 3 images
    files = sorted(p for p in data.rglob("*.png"))
    a, b, c, d = files[0], files[4], files[8], files[1]
    before = _tree(data)
    assert main(["tag", str(data), str(a), str(b), str(c), "--add", "keep"]) == 0
    assert main(["tag", str(data), str(c), "--add", "odd,second look"]) == 0
    assert main(["views", str(data), "--save", "picked", "--tags", "keep", "--not-tags", "odd"]) == 0
    model = ["--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--quiet"]

    def predicted(*extra):
        capsys.readouterr()
        assert main(["predict", str(data), "--view", "picked", "--json", *model, *extra]) == 0
        return [json.loads(line)["path"] for line in capsys.readouterr().out.splitlines()]

    assert predicted() == [str(a), str(b)]
    assert main(["tag", str(data), str(d), "--add", "keep"]) == 0  # a rule, not a list: d joins the view
    assert predicted() == [str(a), str(d), str(b)]  # in the folder's order
    capsys.readouterr()
    assert main(["views", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"picked": {"images": 3, "rules": [
        {"field": "tags", "op": "any", "value": ["keep"]}, {"field": "tags", "op": "none", "value": ["odd"]}]}}
    assert views.read_tags(data)[c.relative_to(data).as_posix()] == ["keep", "odd", "second look"]
    # a view is a dataset: audit and finetune read it as a labels file of its images and their class folders
    with view_select.view_labels_file(data, "picked").open() as fh:
        assert [tuple(r) for r in csv.reader(fh)][1:] == [(str(p), p.parent.name) for p in (a, d, b)]
    assert _tree(data) == before  # tags and views live in the app's records, not in the folder
    assert {p.name for p in dataset_dir(data).iterdir()} >= {"tags.json", "views.json"}


def test_a_view_on_prediction_and_confidence_selects_what_predict_says(tmp_path, tiny_weights, capsys):
    """The Folder tab's rules on its model columns (as `FolderTags.current_rules` writes them) on the command line,
    computed through the embedding cache: the same files as filtering `predict --json`'s records by hand.

    A view with the Folder tab's rules (prediction in [a class], confidence ≥ a cut between two images') given to
    `predict --view` with --model predicts exactly the files `predict --json`'s records pass by hand (computed in the
    test); `views --json --model` counts them; without --model its count is null with what it needs; a rule on a column
    no face computes (uniqueness) is refused in one line naming it.
    """
    data = make_dataset(tmp_path / "data", per_class=3)
    model = ["--model", TINY_SPEC, "--weights", str(tiny_weights[0])]
    assert main(["predict", str(data), "--json", "--quiet", *model]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    top = [(r["path"], r["top"][0]["label"], r["top"][0]["prob"]) for r in records]
    label = top[0][1]
    probs = sorted(p for _, _, p in top)
    cut = (probs[3] + probs[4]) / 2  # between two images' confidences: no tie to round either way
    views.save_view(data, "sure", [{"field": "prediction", "op": "in", "value": [label]},
                                   {"field": "confidence", "op": ">=", "value": cut}])
    expected = [path for path, name, p in top if name == label and p >= cut]
    assert 0 < len(expected) < len(top)
    assert main(["predict", str(data), "--view", "sure", "--json", "--quiet", *model]) == 0
    assert [json.loads(line)["path"] for line in capsys.readouterr().out.splitlines()] == expected
    assert main(["views", str(data), "--json", *model]) == 0
    assert json.loads(capsys.readouterr().out)["sure"]["images"] == len(expected)
    assert main(["views", str(data), "--json"]) == 0  # no model: the count says what it needs
    assert json.loads(capsys.readouterr().out)["sure"] == {
        "rules": views.read_views(data)["sure"], "images": None, "needs": "--model (rules on prediction, confidence)"}
    views.save_view(data, "odd", [{"field": "uniqueness", "op": ">=", "value": 0.5}])  # no face computes it
    assert main(["predict", str(data), "--view", "odd", "--quiet", *model]) == 2
    assert "needs a uniqueness column" in capsys.readouterr().err


def test_tags_follow_a_move_inside_the_folder_and_out_of_it_and_come_back_on_undo(tmp_path):
    """A label-review move to another class folder renames the file's tags in the folder's records; a `sort --move` out
    of the folder takes the tags to the output folder's records (under its new relative path) and off the folder's;
    undoing each puts them back: the records equal the ones before.
    """
    from vitstudio.core.folder.sorting import apply_sort, plan_sort
    from vitstudio.core.folder.undo import undo_sort

    data, out = make_dataset(tmp_path / "data", per_class=2), tmp_path / "out"
    files = sorted(str(p) for p in data.rglob("*.png"))
    a, b = files[0], files[-1]
    views.tag(data, [a], add=["keep"])
    views.tag(data, [b], add=["odd", "second look"])
    before = views.read_tags(data)
    relabelled = plan_sort([(a, "green", 1.0)], data, move=True)  # the label review's move to another class folder
    inside = apply_sort(relabelled, kind="review-move")
    moved_a = relabelled.placements[0].target
    assert views.read_tags(data) == {views.relative(data, moved_a): ["keep"], views.relative(data, b): before[
        views.relative(data, b)]}
    sorted_out = plan_sort([(b, "unsure", 0.1)], out, move=True)  # `sort --move` out of the folder
    outside = apply_sort(sorted_out)
    assert views.read_tags(data) == {views.relative(data, moved_a): ["keep"]}
    assert views.read_tags(out) == {views.relative(out, sorted_out.placements[0].target): ["odd", "second look"]}
    undo_sort(outside.log)
    assert views.read_tags(out) == {} and views.read_tags(data)[views.relative(data, b)] == ["odd", "second look"]
    undo_sort(inside.log)
    assert views.read_tags(data) == before


def test_a_file_outside_the_folder_is_refused_and_nothing_is_written(tmp_path, capsys):
    """`vitstudio tag FOLDER FILE` with FILE outside FOLDER is one line, exit 2, and leaves the records as they were
    (it was stored under its absolute path, exit 0)."""
    data = make_dataset(tmp_path / "data", per_class=1)
    other = make_dataset(tmp_path / "other", per_class=1)
    inside, outside = sorted(data.rglob("*.png"))[0], sorted(other.rglob("*.png"))[0]
    assert main(["tag", str(data), str(inside), "--add", "keep"]) == 0
    before = (dataset_dir(data) / "tags.json").read_bytes()
    capsys.readouterr()
    assert main(["tag", str(data), str(inside), str(outside), "--add", "odd"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {outside} is not inside {data}"), lines
    assert (dataset_dir(data) / "tags.json").read_bytes() == before
    with pytest.raises(ValueError, match="is not inside"):
        views.tag(data, [outside], remove=["keep"])


def test_tags_follow_a_file_moved_by_anything_and_records_of_the_first_version_are_migrated(tmp_path):
    """Tags are found again by the file's content (as the folder caches key files) when the folder is read after
    a move no journal saw (the file manager, a rename); a tags.json the first version wrote (paths only) still
    reads, and is given the digests on the first read, so its files follow their moves from then on."""
    data = make_dataset(tmp_path / "data", per_class=2)
    files = sorted(data.rglob("*.png"))
    a, b, c = files[0], files[2], files[4]
    views.tag(data, [a], add=["keep"])
    views.tag(data, [b], add=["odd"])
    moved = data / "green" / "renamed.png"
    a.rename(moved)  # into another class folder, under another name
    listing = sorted(data.rglob("*.png"))
    assert views.read_tags(data, listing) == {"green/renamed.png": ["keep"], views.relative(data, b): ["odd"]}
    views.save_view(data, "kept", [{"field": "tags", "op": "any", "value": ["keep"]}])
    assert view_select.view_files(data, "kept") == [moved]

    records = dataset_dir(data) / "tags.json"  # as the first version wrote it: paths and names only
    records.write_text(json.dumps({"dataset": str(data), "tags": {views.relative(data, c): ["first"],
                                                                  "green/renamed.png": ["keep"]}}))
    assert views.read_tags(data, listing)[views.relative(data, c)] == ["first"]
    assert set(json.loads(records.read_text())["content"]) == {views.relative(data, c), "green/renamed.png"}
    c.rename(data / "blue" / "999.png")
    moved.unlink()  # deleted: its tags stay in the records (the file may come back), found by nothing
    listing = sorted(data.rglob("*.png"))
    assert views.read_tags(data, listing) == {"blue/999.png": ["first"], "green/renamed.png": ["keep"]}
    assert json.loads(records.read_text())["searched"]  # the failed search is not run again on the same listing


def test_two_writers_at_once_lose_no_tag(tmp_path):
    """Tags and views are read, changed and written under one lock: two processes tagging at once (the window and
    a command) keep each other's tags."""
    import multiprocessing

    data = make_dataset(tmp_path / "data", per_class=8)
    files = sorted(str(p) for p in data.rglob("*.png"))
    halves = files[::2], files[1::2]
    fork = multiprocessing.get_context("fork")
    start = fork.Barrier(2)
    writers = [fork.Process(target=_tag_each, args=(data, half, start)) for half in halves]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [w.exitcode for w in writers] == [0, 0]
    assert sorted(views.read_tags(data)) == sorted(views.relative(data, f) for f in files)


def _tag_each(data, files, start) -> None:
    start.wait()
    for f in files:
        views.tag(data, [f], add=["seen"])


@pytest.mark.parametrize("argv, says", [
    (["predict", "DATA", "--view", "nope"], "No view named 'nope' is saved"),
    (["predict", "DATA", "DATA", "--view", "picked"], "--view NAME goes with one folder"),
    (["audit", "DATA", "--view", "picked", "--labels", "x.csv"], "give --view NAME or --labels"),
    (["views", "DATA", "--tags", "keep"], "describe a view to --save NAME"),
    (["tag", "DATA", "DATA/red", "--add", " ,"], "give --add and/or --remove with tag names"),
    (["views", "DATA/missing"], "is not a folder"),
])
def test_a_view_or_tag_given_wrong_is_one_line(argv, says, tmp_path, tiny_weights, capsys):
    """An unknown view, a view with two folders, `--view` with `--labels`, rules without `--save`, empty tag names, a
    missing folder: one `error:` line, exit 2. [parametrised ×6]
    """
    data = make_dataset(tmp_path / "data", per_class=1)
    views.save_view(data, "picked", [{"field": "label", "op": "in", "value": ["red"]}])
    argv = [a.replace("DATA", str(data)) for a in argv]
    if argv[0] in ("predict", "audit"):
        argv += ["--model", TINY_SPEC, "--weights", str(tiny_weights[0]), "--quiet"]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], lines


def test_rules_select_what_a_plain_loop_selects():
    """`select` over 200 rows (tags any/none/all, label not in, path glob, a numeric column ≥) equals a plain Python
    loop; a rule on a column not at hand, a wrong operator and a bad tag name are refused.
    """
    rng = np.random.default_rng(0)
    names = ["keep", "odd", "blurry"]
    n = 200
    columns = {"path": [f"{c}/{i}.{'jpg' if i % 3 else 'png'}" for i, c in enumerate(rng.choice(["a", "b"], n))],
               "label": list(rng.choice(["a", "b", None], n)),
               "tags": [set(rng.choice(names, rng.integers(0, 3), replace=False)) for _ in range(n)],
               "confidence": list(rng.random(n))}
    rules = [{"field": "tags", "op": "any", "value": ["keep", "blurry"]},
             {"field": "tags", "op": "none", "value": ["odd"]},
             {"field": "label", "op": "not in", "value": [None]},
             {"field": "path", "op": "glob", "value": "a/*.jpg"},
             {"field": "confidence", "op": ">=", "value": 0.3}]
    expected = [i for i in range(n) if columns["tags"][i] & {"keep", "blurry"} and "odd" not in columns["tags"][i]
                and columns["label"][i] is not None and fnmatch.fnmatchcase(columns["path"][i], "a/*.jpg")
                and columns["confidence"][i] >= 0.3]
    assert 3 <= len(expected) < n // 4
    assert np.flatnonzero(view_select.select(rules, columns)).tolist() == expected
    all_tags = view_select.select([{"field": "tags", "op": "all", "value": ["keep", "odd"]}], columns)
    assert np.flatnonzero(all_tags).tolist() == [i for i in range(n) if {"keep", "odd"} <= columns["tags"][i]]
    with pytest.raises(ValueError, match="needs a prediction column"):
        view_select.select([{"field": "prediction", "op": "in", "value": ["a"]}], {"path": columns["path"]})
    with pytest.raises(ValueError, match="takes any, all, none"):
        views.check_rules([{"field": "tags", "op": ">=", "value": 1}])
    for bad in (" keep", "", "a,b"):
        with pytest.raises(ValueError, match="non-empty word"):
            views.check_name(bad, "tag")


def test_a_view_is_exported_by_class_folder_and_undone(tmp_path, capsys):
    """`views --export NAME --out DIR --labels-csv FILE` (issue 50 item 6): the view's 4 images copied byte for byte
    into DIR/<class folder>/, the labels file lists them with their class folders; `undo-sort DIR` removes the copies,
    the folder keeps its 6; an --out inside the folder is refused.
    """
    data = make_dataset(tmp_path / "data", per_class=2)
    chosen = [p for p in sorted(data.rglob("*.png")) if p.parent.name != "green"]
    views.save_view(data, "not green", [{"field": "label", "op": "not in", "value": ["green"]}])
    out, labels = tmp_path / "out", tmp_path / "labels.csv"
    assert main(["views", str(data), "--export", "not green", "--out", str(out), "--labels-csv", str(labels)]) == 0
    copied = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
    assert copied == sorted(p.relative_to(data).as_posix() for p in chosen) and len(copied) == 4
    assert all((out / c).read_bytes() == (data / c).read_bytes() for c in copied)
    with labels.open() as fh:
        assert [tuple(r) for r in csv.reader(fh)][1:] == [(str(p), p.parent.name) for p in chosen]
    assert main(["undo-sort", str(out)]) == 0  # the sort's journal: undone like a sort
    assert not list(out.rglob("*.png")) and len(list(data.rglob("*.png"))) == 6
    assert main(["views", str(data), "--export", "not green", "--out", str(data / "red")]) == 2  # inside: refused
    assert "inside the source folder" in capsys.readouterr().err
