"""Edit → Undo / Redo in the real window (issue 21, item 4): Ctrl+Z undoes a sort, a label-review move and an
exclusion, Ctrl+Shift+Z redoes them, over the journal the command line uses — kept in the app's data folder, never in
the dataset or the output folder. Undo keeps (and names) a copy the user edited. After a move the results table
follows the file, so a later sort copies every image (the issue: 398 promised, 397 made, a raw [Errno 2])."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from tests.core.synthetic_data import tree_state
from tests.gui.helpers import folder_panel
from tests.gui.test_folder_panel import _digits, _settle
from vitstudio.core.files import journals_dir
from vitstudio.core.folder.label_review import LabelIssue
from vitstudio.core.models.demo import bundled_demo


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(root: Path) -> dict:
    return {k: v for k, v in tree_state(root).items() if (root / k).is_file()}


def _undo(qtbot, window) -> None:
    qtbot.keyClick(window, Qt.Key_Z, Qt.ControlModifier)
    _settle(qtbot)


def _redo(qtbot, window) -> None:
    qtbot.keyClick(window, Qt.Key_Z, Qt.ControlModifier | Qt.ShiftModifier)
    _settle(qtbot)


def _open(window, qtbot, data: Path):
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))
    window.show_tab("folder")
    window.activateWindow()
    panel = window.folder
    panel.open_folder(str(data))
    _settle(qtbot)
    qtbot.waitUntil(lambda: panel.results is not None, timeout=30000)
    return panel


def test_ctrl_z_undoes_a_sort_and_ctrl_shift_z_redoes_it(window, qtbot, tmp_path):
    """A GUI sort copies 20 files with the journal in the data folder; Ctrl+Z removes all copies but the edited one
    (named), and emptied folders; Ctrl+Shift+Z redoes without overwriting the edit; dataset untouched. [window]
    """
    data = _digits(tmp_path, per_class=2)
    before = _files(data)
    messages = []
    window.state.message.connect(lambda level, text: messages.append((level, text)))
    panel = _open(window, qtbot, data)
    assert not panel.toolbar.undo_button.isEnabled() and not window.edit_actions.undo.isEnabled()

    out = tmp_path / "sorted"
    panel.files.run_sort(panel.sort_plan(str(out), 0.0, False, selected_only=False))
    _settle(qtbot)
    copies = sorted(out.rglob("*.png"))
    assert len(copies) == 20 and sorted(map(file_digest, copies)) == sorted(map(file_digest, data.rglob("*.png")))
    undo = panel.toolbar.undo_button
    assert window.edit_actions.undo.text() == "Undo Sort 20 images into sorted" and undo.isEnabled()
    assert undo.toolTip().startswith("Undo Sort 20 images")  # the button "Undo last sort/move" also
    # undid labels and exclusions (the walk): it says "Undo" and names what in its tooltip
    assert [p for p in out.rglob("*") if p.is_file() and p.suffix != ".png"] == []  # no journal in the output
    assert len(list(journals_dir(out).glob("vitstudio-sort-*.jsonl"))) == 1

    edited = copies[0]
    edited.write_bytes(b"the user's edit")
    _undo(qtbot, window)
    assert [p for p in out.rglob("*") if p.is_file()] == [edited]  # every copy gone but the edited one
    assert sorted(p for p in out.iterdir()) == [edited.parent]  # the emptied class folders too
    assert any(str(edited) in text and "changed since the sort" in text for _, text in messages)
    assert window.edit_actions.redo.text() == "Redo Sort 20 images into sorted"

    _redo(qtbot, window)
    again = [p for p in out.rglob("*.png") if p != edited]
    assert len(again) == 20 and sorted(map(file_digest, again)) == sorted(map(file_digest, data.rglob("*.png")))
    assert edited.read_bytes() == b"the user's edit"  # never overwritten: its copy got another name
    _undo(qtbot, window)
    assert [p for p in out.rglob("*") if p.is_file()] == [edited]
    assert _files(data) == before  # the dataset byte-identical (and untouched: same mtimes) throughout


def _review(panel, data: Path, paths: list[Path]) -> None:
    """The review list as a label review shows it (the review itself is tested in test_folder_panel)."""
    panel.app.pages["review"].show_issues([LabelIssue(str(p), p.parent.name, "5", 0.1, 0.2, True) for p in paths])


def test_move_and_exclusion_undo_redo_and_the_table_follows(window, qtbot, tmp_path, monkeypatch):
    """A review move relocates the file and the table follows (given label), journal outside dataset; a sort after it
    copies all 20; undo/redo of sort, move and exclusion restore files, review items and table. [window] After a move
    nothing is selected and Move is disabled, so a second click moves nothing (issue 29, item 12).
    """
    data = _digits(tmp_path, per_class=2)
    before = _files(data)
    panel = _open(window, qtbot, data)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Ok)
    threes = sorted((data / "3").iterdir())
    _review(panel, data, threes)
    page = panel.side.page("review")

    page.list.setCurrentRow(0)
    page.relabel_button.click()  # Move to the suggested class (5)
    _settle(qtbot)
    moved = data / "5" / threes[0].name
    assert not threes[0].exists() and moved.exists() and page.list.count() == 1
    # nothing selected after it: a second click moved the next doubtful image (issue 29, item 12)
    assert page.list.currentRow() == -1 and not page.relabel_button.isEnabled()
    page.relabel_button.click()
    _settle(qtbot)
    assert threes[1].exists() and page.list.count() == 1
    assert str(moved) in panel.results.paths and str(threes[0]) not in panel.results.paths  # the table follows
    row = panel.results.paths.index(str(moved))
    assert panel.results.given[row] == "5"
    assert not list(data.rglob("*.jsonl")) and list(journals_dir(data).glob("vitstudio-move-*.jsonl"))

    # a sort right after the move finds every file where it is now
    out = tmp_path / "sorted"
    panel.files.run_sort(panel.sort_plan(str(out), 0.0, False, selected_only=False))
    _settle(qtbot)
    assert len(list(out.rglob("*.png"))) == 20
    _undo(qtbot, window)  # the sort
    assert not list(out.rglob("*.png"))

    _undo(qtbot, window)  # the move: the file back, its review item back, the table back
    assert _files(data) == before and not (data / "5" / threes[0].name).exists()
    assert page.list.count() == 2 and str(threes[0]) in panel.results.paths
    assert panel.results.given[panel.results.paths.index(str(threes[0]))] == "3"
    _redo(qtbot, window)
    assert moved.exists() and not threes[0].exists() and str(moved) in panel.results.paths
    _undo(qtbot, window)
    assert _files(data) == before

    page.list.setCurrentRow(1)
    page.exclude_button.click()  # Exclude from training
    assert page.model.excluded == {str(threes[1])} and page.list.count() == 1
    assert window.edit_actions.undo.text() == f"Undo Exclude {threes[1].name} from training"
    _undo(qtbot, window)
    assert page.model.excluded == set() and page.list.count() == 2
    assert page.list.item(1).data(Qt.UserRole)[0] == str(threes[1])  # back where it was
    _redo(qtbot, window)
    assert page.model.excluded == {str(threes[1])} and page.list.count() == 1
    assert _files(data) == before and not any(".jsonl" in name or "exclu" in name for name in os.listdir(data))


def test_a_sort_a_label_and_a_paint_stroke_are_undone_in_reverse_order_from_any_tab(window, qtbot, tmp_path):
    """One undo for the app: a sort (Folder tab), a label (Labels page) and a paint stroke (Paint page) are taken back
    by Ctrl+Z in the reverse order they were made, pressed on three other tabs, and Ctrl+Shift+Z redoes the stroke;
    the Edit menu names each step. [window]"""
    data = _digits(tmp_path, per_class=1)
    panel = _open(window, qtbot, data)
    out = tmp_path / "sorted"
    panel.files.run_sort(panel.sort_plan(str(out), 0.0, False, selected_only=False))  # 1: a sort
    _settle(qtbot)
    assert len(list(out.rglob("*.png"))) == 10
    first = panel.results.paths[0]
    panel.app.labels.label([first], "7")  # 2: a label
    assert panel.app.labels.labels == {first: "7"}
    page = window.app.pages["paint"]  # 3: a stroke on the current image
    panel.folder_model.select(0)
    _settle(qtbot)
    page.press(4, 4)
    page.drag(20, 20)
    page.release()
    painted = page.paint.mask(first).copy()
    assert (painted != 255).any() and window.edit_actions.undo.text() == f"Undo Paint stroke on {Path(first).name}"
    for tab, undone in (("attention", "stroke"), ("training", "label"), ("predictions", "sort")):
        window.show_tab(tab)
        _undo(qtbot, window)
        if undone == "stroke":
            assert page.paint.mask(first) is None or not (page.paint.mask(first) != 255).any()
            assert panel.app.labels.labels == {first: "7"} and len(list(out.rglob("*.png"))) == 10
        elif undone == "label":
            assert panel.app.labels.labels == {} and len(list(out.rglob("*.png"))) == 10
        else:
            assert not list(out.rglob("*.png"))
    assert not window.edit_actions.undo.isEnabled()
    _redo(qtbot, window)  # the sort again, then the label, then the stroke
    _redo(qtbot, window)
    _redo(qtbot, window)
    assert panel.app.labels.labels == {first: "7"} and (page.paint.mask(first) == painted).all()


def test_the_review_reads_the_labels_tab_and_relabels_there_without_moving_the_file(panel, qtbot, tmp_path,
                                                                                      monkeypatch):
    """Walk finding 5: a label given on the Labels tab (shown bold in the table's "given") was ignored by the label
    review, which read the folder the file is in. The review reads it now; its "suggested class" changes that label
    (undoable: the Folder tab's Undo button) and leaves the file where it is, in the folder the user never asked to
    touch. The Folder panel alone: Ctrl+Z through the window is the tests above.

    [panel]
    """
    data = _digits(tmp_path, per_class=6)
    before = _files(data)
    panel = folder_panel(panel, qtbot, data)
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a) or QMessageBox.Ok)
    three = str(sorted((data / "3").iterdir())[0])
    panel.app.labels.label([three], "8")  # a wrong label, given on the Labels tab
    page = panel.side.page("review")
    panel.start_review()
    _settle(qtbot)
    issue = next(i for i in panel.report.label_issues if i.path == three)
    assert issue.given == "8"  # not its folder's "3"
    assert any("apart from the folders" in note for note in panel.report.notes)
    row = next(r for r in range(page.list.count()) if page.list.item(r).data(Qt.UserRole)[0] == three)
    page.list.setCurrentRow(row)
    shown = page.list.count()
    suggested = page.list.item(row).data(Qt.UserRole)[1]
    page.relabel_button.click()
    _settle(qtbot)
    assert panel.app.labels.labels[three] == suggested and page.list.count() == shown - 1
    assert not asked and _files(data) == before  # no move asked, no file touched
    panel.toolbar.undo_button.click()
    _settle(qtbot)
    assert panel.app.labels.labels[three] == "8" and page.list.count() == shown
