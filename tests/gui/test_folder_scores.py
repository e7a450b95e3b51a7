"""The brain's scores on the Folder tab (issue 50 item 5): computed in the background once a folder is open, they are
the table's last four columns (sortable, in the gallery's sort list), a colouring of the map on a continuous scale,
and columns of the export of every column — each the number `vitstudio scores --json` gives for the same folder;
another folder or model drops them and they are computed again for it."""

from __future__ import annotations

import csv
import json
import math
import shutil

import numpy as np
from PySide6.QtCore import Qt

from tests.gui.helpers import settle
from vitstudio.core.folder.score_names import NAMES
from vitstudio.core.models.demo import bundled_demo, render_digits
from vitstudio.core.models.loading import load_model
from vitstudio.gui.folder.folder_table import FIRST_SCORE


def _cli_scores(folder, capsys) -> dict[str, dict]:
    from vitstudio.cli import main

    capsys.readouterr()
    assert main(["scores", str(folder), "--model", str(bundled_demo()), "--json", "--quiet", "--device", "cpu",
                 "--precision", "fp32"]) == 0
    return {row["path"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}


def _column(folder, name: str) -> dict[str, str]:
    table = folder.table_model
    return {folder.results.paths[table.source_row(i)]: table.data(table.index(i, FIRST_SCORE + NAMES.index(name)))
            for i in range(table.rowCount())}


def _open(folder, qtbot, path) -> None:
    folder.open_folder(str(path))
    settle(qtbot)
    qtbot.waitUntil(lambda: folder.folder_model.scores is not None, timeout=30000)


def test_score_columns_are_the_clis_and_sort_colour_and_export(panel, qtbot, tmp_path, capsys, monkeypatch):
    """On 20 digits the table's uniqueness, representativeness, hardness and mistakenness columns show, row for row,
    `vitstudio scores --json`'s numbers for the same folder; the gallery's "uniqueness ↓" orders the table by the CLI's
    uniqueness, highest (1.0) first; coloured by hardness the map's colour bar runs from 0 to ln(10) and each drawn
    colour holds the images of one tenth of it (the CLI's hardness binned in the test), every image once; Export → CSV
    of every column holds the four scores (1e-6); a folder of loose files leaves mistakenness empty and its header's
    tooltip says no image is in a class folder; another model drops the scores at once (table and model) and, reopened,
    the folder is scored again. [panel]
    """
    from vitstudio.gui.folder.folder_panel import FolderPanel

    data = render_digits(tmp_path / "digits", 2)
    folder = panel(FolderPanel, model=bundled_demo())
    _open(folder, qtbot, data)
    cli = _cli_scores(data, capsys)
    assert len(cli) == len(folder.results) == 20
    for name in NAMES:  # each column shows the command line's number, row for row
        assert _column(folder, name) == {path: f"{row[name]:.3f}" for path, row in cli.items()}, name

    browse = folder.browse  # the gallery's sort list: "uniqueness ↓" orders the table (and grid) by it
    choice = browse.sort.findText("uniqueness ↓")
    assert choice >= 0 and browse.sort.findText("mistakenness ↓") >= 0
    browse.sort.activated.emit(choice)
    shown = [cli[folder.results.paths[folder.table_model.source_row(i)]]["uniqueness"] for i in range(20)]
    assert shown == sorted(shown, reverse=True) and shown[0] == 1.0

    folder.view_state.colour_by = "hardness"  # a colour bar from 0 to ln(10 classes), a step of it per colour
    bar, top = folder.side.page("map").map.colour_bar, math.log(10)
    assert bar.isVisible() and np.allclose(bar.levels(), (0.0, top))
    drawn = [item.data["data"] for item in folder.side.page("map").map.items]
    steps = [{min(int(cli[folder.results.paths[r]]["hardness"] / top * 10), 9) for r in rows} for rows in drawn]
    assert all(len(s) == 1 for s in steps) and len({s.pop() for s in steps}) == len(drawn) > 1
    assert sorted(np.concatenate(drawn).tolist()) == list(range(20))

    out = tmp_path / "every column.csv"  # the export of every column holds the four scores
    monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getSaveFileName", lambda *a, **k: (str(out), ""))
    folder.export_menu.actions["table"].trigger()
    settle(qtbot)
    with open(out, encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 20
    for name in NAMES:
        np.testing.assert_allclose([float(r[name]) for r in rows], [cli[r["path"]][name] for r in rows], atol=1e-6)

    loose = tmp_path / "loose"  # files outside any class folder: no mistakenness, and the column says why
    loose.mkdir()
    for path in list(cli)[:4]:
        shutil.copy(path, loose / f"{len(list(loose.iterdir()))}.png")
    _open(folder, qtbot, loose)
    assert set(_column(folder, "mistakenness").values()) == {""} and "" not in _column(folder, "hardness").values()
    why = folder.table_model.headerData(FIRST_SCORE + 3, Qt.Horizontal, Qt.ToolTipRole)
    assert "no image is in a class folder" in why

    before = folder.folder_model.scores  # another model (the same weights): its scores go at once, and come again
    folder.state.set_model(load_model(str(bundled_demo()), device="cpu", precision="fp32"))
    table = folder.table_model
    assert folder.folder_model.scores is None and table.scores is None and table.rowCount() == 0
    settle(qtbot)
    qtbot.waitUntil(lambda: folder.folder_model.scores is not None, timeout=30000)
    assert folder.folder_model.scores is not before and folder.table_model.scores is folder.folder_model.scores
    assert _column(folder, "hardness") == {p: f"{h:.3f}" for p, h in zip(before.paths, before.hardness)}


def test_table_leaves_mistakenness_empty_for_classes_the_model_cannot_know(qtbot):
    """Folders named for classes the model does not have: the table's mistakenness column is empty (the other
    scores are not), its header tooltip, each cell's tooltip and the gallery's sort entry give the reason."""
    from PySide6.QtWidgets import QTableView

    from vitstudio.core.folder.results import FolderResults
    from vitstudio.core.folder.scores import FolderScores, mistakenness
    from vitstudio.gui.folder.folder_gallery import SORTS, TableOrGalleryWidget
    from vitstudio.gui.folder.folder_table import ResultsModel

    given = ("ants", "ants", "bees", "bees")
    results = FolderResults(tuple(f"/f/{g}/{i}.png" for i, g in enumerate(given)), given, np.array([0, 1, 1, 0]),
                            np.full(4, 0.9), np.full(4, 0.8), ("0", "1"))
    logits = np.array([[3.0, 0.0], [0.0, 3.0], [0.0, 3.0], [3.0, 0.0]])
    value = np.linspace(0.2, 0.8, 4)
    scores = FolderScores(results.paths, given, ("0", "1", "1", "0"), value, value, value,
                          mistakenness(logits, ("0", "1", "1", "0"), [None] * 4), (), ("ants", "bees"), ("0", "1"))
    table_model = ResultsModel()
    view = QTableView()
    view.setModel(table_model)
    qtbot.addWidget(view)
    both = TableOrGalleryWidget(view, table_model)
    qtbot.addWidget(both)
    table_model.set_results(results, None)
    table_model.set_scores(scores)
    column = FIRST_SCORE + NAMES.index("mistakenness")
    cells = [table_model.index(i, column) for i in range(4)]
    assert [table_model.data(c) for c in cells] == [""] * 4
    assert all(table_model.data(table_model.index(i, FIRST_SCORE)) for i in range(4))  # uniqueness is there
    why = "ants, bees are not among the model's classes"
    assert why in table_model.headerData(column, Qt.Horizontal, Qt.ToolTipRole)
    assert all(why in table_model.data(c, Qt.ToolTipRole) for c in cells)
    entry = next(i for i, (c, _o, _t) in enumerate(SORTS) if c == column)
    assert why in both.sort.itemData(entry, Qt.ToolTipRole)
