"""The Folder toolbar's Export… menu (issue 50 item 6) on one panel: its label counts what an export takes (the rows
the filters leave, or a multi-selection of the table), a copy into class folders through it is a sort on the tab's
undo stack (the toolbar's Undo takes the copies away), every column is written by a background job, and "Train on
them" hands a labels file of exactly those images to the Training tab."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from PySide6.QtCore import QItemSelectionModel
from PySide6.QtWidgets import QMessageBox

from tests.gui.helpers import settle
from vitstudio.core.data.labels_file import read_labels_file
from vitstudio.core.models.demo import bundled_demo, render_digits


def test_the_export_menu_counts_the_selection_copies_undoably_and_hands_it_to_training(panel, qtbot, tmp_path,
                                                                                        monkeypatch):
    """Greyed "Export…" before a folder; "Export 20 images…" once opened, the count following a predicted-class filter
    and then three rows picked in the table (its tooltip says they are the ones); Copy into class folders copies exactly
    those three into OUT/<class folder>/ as a sort on the tab's undo stack ("Undo Sort 3 images into out"), and the
    toolbar's Undo takes them away; CSV of every column writes those three rows from a background job; with one digit
    painted on the Paint page, Masks as COCO JSON holds exactly those three images (file names relative to the folder,
    the page's classes); "Train on them" hands on a labels file of exactly them. [panel]
    """
    from vitstudio.gui.folder.folder_panel import FolderPanel

    folder = panel(FolderPanel, model=bundled_demo())
    button = folder.toolbar.export_button
    assert button.text() == "Export…" and not button.isEnabled()  # nothing opened: nothing to export
    data = render_digits(tmp_path / "digits", per_class=2)
    folder.open_folder(str(data))
    settle(qtbot)
    assert button.text() == "Export 20 images…" and button.isEnabled()
    folder.view_state.predicted = folder.results.predicted_label(0)  # a filter: the count follows the rows shown
    shown = folder.visible_rows()
    assert 0 < len(shown) < 20 and button.text() == f"Export {len(shown)} image{'s' * (len(shown) > 1)}…"
    folder.view_state.predicted = None
    _paint_first_digit(folder, qtbot)  # for the COCO export: both classes painted on one digit
    selection = folder.table.selectionModel()
    selection.clearSelection()
    for view_row in (1, 4, 6):  # three rows picked in the table: they are what is exported
        selection.select(folder.table_model.index(view_row, 0), QItemSelectionModel.Select | QItemSelectionModel.Rows)
    picked = sorted(folder.table_model.source_row(r) for r in (1, 4, 6))
    assert button.text() == "Export 3 images…" and "3 images selected in the table" in button.toolTip()
    assert [a.text() for a in button.menu().actions()][:2] == ["Copy into class folders…", "Move into class folders…"]

    out = tmp_path / "out"
    monkeypatch.setattr("vitstudio.gui.file_dialogs.choose_folder", lambda *a, **k: str(out))
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Ok)
    folder.export_menu.actions["copy"].trigger()
    settle(qtbot)
    copied = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
    assert copied == sorted(f"{folder.results.given[r]}/{Path(folder.results.paths[r]).name}" for r in picked)
    undo = folder.toolbar.undo_button
    assert undo.isEnabled() and undo.toolTip().startswith("Undo Sort 3 images into out")
    folder.toolbar.undo_button.click()
    settle(qtbot)
    assert not list(out.rglob("*.png")) and len(list(data.rglob("*.png"))) == 20

    monkeypatch.setattr("vitstudio.gui.file_dialogs.save_file", lambda *a, **k: str(tmp_path / "all.csv"))
    folder.export_menu.actions["table"].trigger()
    settle(qtbot)
    with open(tmp_path / "all.csv", encoding="utf-8-sig", newline="") as fh:
        assert [r["path"] for r in csv.DictReader(fh)] == [folder.results.paths[r] for r in picked]
    monkeypatch.setattr("vitstudio.gui.file_dialogs.save_file", lambda *a, **k: str(tmp_path / "masks.json"))
    folder.export_menu.actions["coco"].trigger()  # the Paint page's segmentation of the three
    settle(qtbot)
    doc = json.loads((tmp_path / "masks.json").read_text())
    assert [i["file_name"] for i in doc["images"]] == [str(Path(folder.results.paths[r]).relative_to(data))
                                                         for r in picked]
    assert [c["name"] for c in doc["categories"]] == ["background", "object"] and doc["annotations"]
    handed = []
    folder.folder_export.train_requested.connect(handed.append)
    folder.export_menu.actions["training"].trigger()
    qtbot.waitUntil(lambda: bool(handed), timeout=10000)  # written in the background, then handed on
    assert [str(p) for p, _ in read_labels_file(handed[0]).labelled] == [folder.results.paths[r] for r in picked]


def _paint_first_digit(folder, qtbot) -> None:
    """The first row selected and painted on the Paint page: background along its top, object across its middle."""

    page = folder.app.pages["paint"]
    folder.select_row(0)
    qtbot.waitUntil(lambda: page.picture is not None, timeout=10000)
    for brush, (start, end) in ((0, ((0, 0), (31, 0))), (1, ((8, 16), (24, 16)))):
        page.paint.state.update(radius=1, brush_class=brush)
        page.press(*start)
        page.drag(*end)
        page.release()
    settle(qtbot)
