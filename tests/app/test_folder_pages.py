"""The Similar images and Duplicates pages' models (Folder-tab pages on the protocol: app/pages/similar_images.py,
app/pages/duplicates.py), without Qt: what each shows follows the Folder model's events; nothing of earlier results
stays."""

from __future__ import annotations

from vitstudio.app.app import App
from vitstudio.app.folder_page import FolderPageModel
from vitstudio.app.jobs import ScriptRunner
from vitstudio.core.folder.neighbours import nearest
from vitstudio.core.models.demo import bundled_demo, render_digits


def test_the_page_shows_the_picked_rows_neighbours_and_forgets_them_with_the_results(tmp_path):
    """A row picked in the folder is the page's query and its neighbours are the core's `nearest` of its features, in
    order; another row replaces both; another folder's results leave neither; the page is the App's, registered
    under "similar", with every member the page protocol declares."""
    app = App(ScriptRunner())
    app.load_model(str(bundled_demo()))
    app.folder.open_paths([str(render_digits(tmp_path / "digits", 2))])
    page, results, heard = app.pages["similar"], app.folder.results, []
    page.changed.connect(heard.append)
    assert all(hasattr(page, name) for name in ("title", "tooltip", "show"))
    assert set(FolderPageModel.__annotations__) <= set(dir(page))
    app.folder.select(3)
    expected = nearest(app.folder.embedded.features, [3], k=len(page.found), rows=app.folder.embedded.rows)
    assert page.query_path == results.paths[3] and len(page.found) >= 5
    assert [path for path, _ in page.found] == [results.paths[i] for i in expected.indices[0]]
    assert all(a >= b for (_, a), (_, b) in zip(page.found, page.found[1:]))
    app.folder.select(7)
    assert page.query_path == results.paths[7] and results.paths[7] not in [p for p, _ in page.found]
    app.folder.open_paths([str(render_digits(tmp_path / "more", 1))])
    assert page.query is None and page.found == [] and heard[:2] == ["query", "found"]


def test_the_duplicates_page_holds_the_reviews_groups_and_picks_one_into_the_table(tmp_path):
    """The Duplicates page's model (app/pages/duplicates.py) holds the label review's groups (an exact copy planted
    across two class folders is one, a leak across the split the audit made up); picking it leaves only its images in
    the Folder model's rows, None all of them again; another folder's results leave no group."""
    import shutil

    app = App(ScriptRunner())
    app.load_model(str(bundled_demo()))
    digits = render_digits(tmp_path / "digits", 2)
    first = sorted((digits / "3").glob("*.png"))[0]
    shutil.copy(first, digits / "8" / "copy.png")
    app.folder.open_paths([str(digits)])
    page = app.pages["duplicates"]
    assert page.groups == () and not page.reviewed
    app.folder.start_review(None, {})
    exact = [g for g in page.groups if g.exact]
    assert page.reviewed and page.made_up_split and len(exact) == 1
    assert sorted(exact[0].paths) == sorted([str(first), str(digits / "8" / "copy.png")])
    page.pick(exact[0].paths)
    assert sorted(app.folder.results.paths[r] for r in app.folder.rows) == sorted(exact[0].paths)
    page.pick(None)
    assert len(app.folder.rows) == len(app.folder.results)
    app.folder.open_paths([str(render_digits(tmp_path / "more", 1))])
    assert page.groups == () and not page.reviewed


def test_a_page_module_dropped_into_the_package_is_a_page_of_the_app_with_no_edit_elsewhere(tmp_path, monkeypatch):
    """A new page costs its own modules only: a module with a `PAGE` entry placed on the pages package's path is
    listed by `page_entries` in its group by rank, and a fresh App builds its model on the Folder model; a second
    module reusing an id, or an entry naming no known group, is refused with the id in the line."""
    import pytest

    from vitstudio.app import pages

    (tmp_path / "notes_page.py").write_text(
        "from vitstudio.app.pages import PageEntry\n\n"
        "class NotesModel:\n    title = 'Notes'\n    tooltip = 'Notes on the folder'\n\n"
        "    def __init__(self, folder):\n        self.folder, self.shown = folder, None\n\n"
        "    def show(self, results):\n        self.shown = results\n\n"
        "PAGE = PageEntry('notes', 'Explore', NotesModel, rank=1)\n")
    monkeypatch.setattr(pages, "__path__", [*pages.__path__, str(tmp_path)])
    entries = pages.page_entries()
    assert [e.id for e in entries if e.group == "Explore"][0] == "notes"
    app = App(ScriptRunner())
    assert app.pages["notes"].folder is app.folder and set(app.pages) >= {"notes", "paint", "similar"}
    (tmp_path / "notes_again.py").write_text("from vitstudio.app.pages import PageEntry\n"
                                             "PAGE = PageEntry('notes', 'Learn', object)\n")
    with pytest.raises(ValueError, match="notes"):
        pages.page_entries()
    with pytest.raises(ValueError, match="Elsewhere"):
        pages.PageEntry("x", "Elsewhere", object)


def test_the_label_review_page_lists_the_doubted_images_and_undoes_its_fixes_on_the_apps_stack(tmp_path):
    """The Label review page's model (app/pages/label_review.py) lists the review's doubted images, most doubtful
    first, and asks to be shown; an exclusion (remembered beside the dataset), a move into the suggested class folder
    (the Folder model's results follow the file) and a relabel of an image labelled on the Labels page (its file stays)
    each take the image off the list, and Undo on the app's one stack puts it back where it was; another folder's
    results leave no list and none of the first folder's exclusions."""
    import shutil
    from pathlib import Path

    from vitstudio.app.folder_files import move_plan, read_exclusions

    app = App(ScriptRunner())
    app.load_model(str(bundled_demo()))
    digits = render_digits(tmp_path / "digits", 4)
    shutil.move(sorted((digits / "3").glob("*.png"))[0], digits / "8" / "wrong.png")  # a three filed as an eight
    app.folder.open_paths([str(digits)])
    page, asked = app.pages["review"], []
    page.show_requested.connect(lambda: asked.append("shown"))
    assert page.issues == [] and page.current is None and not page.can_retrain()
    app.folder.start_review(None, {})
    doubted = [i for i in app.folder.report.label_issues if i.flagged or i.suggested != i.given]
    assert asked == ["shown"] and len(page.issues) >= 3 and page.issues == doubted[:len(page.issues)]
    assert page.current == 0 and page.summary.startswith("cleanlab estimates") and page.can_retrain()

    first, second = page.issues[0], page.issues[1]
    page.exclude()  # the one picked: off the list, remembered beside the dataset
    assert page.excluded == {first.path} and first not in page.issues and page.current is None
    assert read_exclusions(str(digits)) == [first.path]
    app.undo.undo()
    assert page.excluded == set() and page.issues[0] == first and read_exclusions(str(digits)) == []

    page.pick(1)
    page.relabel_current(move_plan)  # the file into its suggested class's folder (the script's "yes")
    moved = str(Path(second.path).parent.parent / second.suggested / Path(second.path).name)
    assert Path(moved).exists() and not Path(second.path).exists() and second not in page.issues
    assert moved in app.folder.results.paths and second.path not in app.folder.results.paths
    app.undo.undo()
    assert Path(second.path).exists() and page.issues[1] == second and second.path in app.folder.results.paths

    third = page.issues[2]
    app.labels.label([third.path], "7")  # labelled on the Labels page: the review relabels it there
    page.relabel(third.path, third.suggested, lambda *_: asked.append("asked"))
    assert app.labels.labels[third.path] == third.suggested and Path(third.path).exists()
    assert third not in page.issues and asked == ["shown"]
    app.undo.undo()
    assert app.labels.labels[third.path] == "7" and page.issues[2] == third

    page.exclude()  # (the third is picked again, back on the list)
    app.folder.open_paths([str(render_digits(tmp_path / "more", 1))])
    assert page.issues == [] and page.summary == "" and page.excluded == set() and not page.can_retrain()


def test_the_labels_page_labels_the_apps_selection_and_says_what_follows_from_the_labels(tmp_path):
    """The Labels page's model (app/pages/labels.py) labels the App's selected rows (else the map's), offering the
    class folder they are in first; keys 1–9 are the classes in the order first given (a key past them is refused, in
    one line); each labelling is undone on the app's one stack; Train, Suggest next and Reset filters change what the
    page says; "Train a model…" hands over the labels file; another folder leaves no selection, no head and its own
    labels file."""
    app = App(ScriptRunner())
    said = []
    app.state.message.connect(lambda level, text: said.append(text))
    app.load_model(str(bundled_demo()))
    page = app.pages["labels"]
    assert not page.ready() and page.describe().startswith("Open a folder")
    app.folder.open_paths([str(render_digits(tmp_path / "digits", 3))])
    paths, first_file = app.folder.results.paths, app.labels.path
    assert page.ready() and page.describe().startswith("0 of 30 images labelled")
    assert page.paths_to_label() == [] and said[-1].startswith("Select images first")

    zeros, ones = [paths.index(p) for p in paths if "/0/" in p], [paths.index(p) for p in paths if "/1/" in p]
    app.selection.select_rows(zeros[:2], "table")
    assert page.selected_paths() == [paths[r] for r in zeros[:2]] and page.offered(page.selected_paths()) == (["0"], 0)
    page.label(page.selected_paths(), "zero")
    app.selection.select_rows([])
    app.folder.map_rows = ones[:2]  # nothing selected in the table: what is selected on the map
    page.label(page.paths_to_label(), "one")
    assert page.counts() == {"zero": 2, "one": 2} and page.describe().startswith("4 of 30 images labelled")
    page.label_as_number(3)
    assert said[-1].startswith("There are 2 classes: keys 1–2") and len(app.labels.labels) == 4
    app.selection.select_rows(zeros[2:], "table")
    page.label_as_number(1)
    assert page.counts() == {"zero": 3, "one": 2}
    app.undo.undo()
    assert page.counts() == {"zero": 2, "one": 2}

    page.train()
    assert app.labels.head is not None and page.note == ("head", 4)
    page.suggest_next()
    shown = len(app.folder.group_rows)
    assert page.describe() == f"The table shows the {shown} images to label next (Reset filters shows all)."
    app.folder.reset_filters()
    assert page.describe().startswith("4 of 30 images labelled")
    handed = []
    page.train_requested.connect(handed.append)
    page.request_training()
    assert handed == [first_file]

    app.selection.select_rows(zeros[:1], "table")
    app.folder.open_paths([str(render_digits(tmp_path / "more", 1))])
    assert app.selection.rows == [] and app.labels.head is None and app.labels.path != first_file
    assert page.counts() == {} and page.describe().startswith("0 of 10 images labelled")
