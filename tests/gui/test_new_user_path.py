"""A new user's afternoon in the window at 1280×720 with the default docks, each step checked against the command line
or against what it must leave behind: Teach from files and a video → export → `vitstudio predict --model EXPORT/run`;
paint → another folder → back; tag → a label-review move → the tag kept; a view with a prediction rule → `--view`."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication, QDockWidget, QInputDialog, QMessageBox

from tests.core.play_video import moving_digits_video
from tests.gui.helpers import load_in_window, settle
from vitstudio.cli import main
from vitstudio.core.models.demo import bundled_demo, render_digits


def _cli_json(capsys, argv: list[str]) -> list[dict]:
    """`vitstudio ARGV` in this process; its JSON lines."""
    capsys.readouterr()
    assert main(argv) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


def _teach_and_export(window, qtbot, tmp_path, capsys) -> None:
    """Two classes from files, a third recorded from a video by holding its card's button, the head refitted; the
    export's run predicts a file as the Teach tab's head in the window does."""
    from vitstudio.core.teach.preview import preview_frame

    teach = window.teach
    window.show_tab("teach")
    digits = render_digits(tmp_path / "digits", per_class=3)
    teach.open_project(str(tmp_path / "project"))
    for name in ("0", "1", "video"):
        teach._act(teach.teach.add_class, name)
    for name in ("0", "1"):
        teach._act(teach.teach.add_files, name, sorted(str(p) for p in (digits / name).glob("*.png")))
    teach.preview(str(moving_digits_video(tmp_path / "v.avi", frames=96, fps=24.0)))
    qtbot.waitUntil(lambda: teach._frame is not None, timeout=30000)
    card = teach.cards["video"]
    qtbot.mousePress(card.record, Qt.LeftButton)
    qtbot.waitUntil(lambda: teach.teach.held is not None and len(teach.teach.held.frames) >= 3, timeout=30000)
    qtbot.mouseRelease(card.record, Qt.LeftButton)
    teach.stop()
    assert int(card.count.text().split()[0]) >= 3
    qtbot.waitUntil(lambda: teach.jobs.current("refit") is not None and teach.teach.live_head is not None,
                    timeout=30000)
    result = teach.jobs.current("refit")
    export = tmp_path / ("an-export-folder-named-at-length-" * 5)  # its path longer than the tab is wide
    teach.export(str(export))
    qtbot.waitUntil(lambda: "Exported" in teach.stats.text(), timeout=60000)
    assert f"predict as the preview on all {len(result.paths)} samples" in teach.stats.text(), teach.stats.text()
    qtbot.wait(20)
    seen = teach.stats.visibleRegion().boundingRect()  # the export's result in sight, not below the fold
    assert seen == teach.stats.rect() and seen.height() >= 2 * teach.stats.fontMetrics().height(), seen

    image = digits / "1" / sorted(p.name for p in (digits / "1").glob("*.png"))[0]
    shown = preview_frame(window.state.model, teach.teach.live_head, np.asarray(Image.open(image).convert("RGB")))
    [line] = _cli_json(capsys, ["predict", str(image), "--model", str(export / "run"), "--json",
                                "--quiet"])
    cli = {top["label"]: top["prob"] for top in line["top"]}
    assert line["top"][0]["label"] == shown.labels[0]
    for label, prob in zip(shown.labels, shown.probs):
        if label in cli:
            assert abs(cli[label] - prob) < 1e-4, (label, cli[label], prob)


def _paint_page(folder):
    side = folder.side
    index = next(i for i in range(side.count()) if side.tabText(i) == "Paint")
    side.setCurrentWidget(side.widget(index))
    return side.widget(index)


def _drag(canvas, pixels: list[tuple[float, float]]) -> None:
    """A left-button drag on the canvas through these image pixels (their centres), as the mouse sends it."""
    rect = canvas.image_rect()
    scale = rect.width() / canvas.picture.width()
    points = [QPointF(rect.left() + (x + 0.5) * scale, rect.top() + (y + 0.5) * scale) for x, y in pixels]
    steps = [(QEvent.MouseButtonPress, Qt.LeftButton, Qt.LeftButton, points[0])]
    steps += [(QEvent.MouseMove, Qt.NoButton, Qt.LeftButton, p) for p in points[1:]]
    steps += [(QEvent.MouseButtonRelease, Qt.LeftButton, Qt.NoButton, points[-1])]
    for kind, button, buttons, point in steps:
        QApplication.sendEvent(canvas, QMouseEvent(kind, point, canvas.mapToGlobal(point), button, buttons,
                                                   Qt.NoModifier))


def _paint_switch_and_back(window, qtbot, tmp_path) -> str:
    """A stroke on the Paint page stays with its image when another folder is opened and this one again."""
    from vitstudio.app.paint_masks import UNPAINTED

    folder = window.folder
    window.show_tab("folder")
    first, other = render_digits(tmp_path / "first", per_class=2), render_digits(tmp_path / "other", per_class=1)
    folder.open_folder(str(first))
    settle(qtbot)
    folder.table.selectRow(0)
    page = _paint_page(folder)
    qtbot.waitUntil(lambda: page.canvas.picture is not None, timeout=10000)
    painted = window.state.selected.path
    _drag(page.canvas, [(8, 8), (12, 10), (16, 12)])
    mask = page.model.paint.masks[painted]
    assert (mask != UNPAINTED).sum() > 0 and page.undo_button.isEnabled()
    folder.open_folder(str(other))
    settle(qtbot)
    assert painted not in page.model.paint.masks
    folder.open_folder(str(first))
    settle(qtbot)
    assert np.array_equal(page.model.paint.masks[painted], mask)  # the stroke is back, with its undo
    assert page.undo_button.isEnabled()
    return str(first)


def _tag_move_and_view(window, qtbot, first: str, monkeypatch, capsys) -> None:
    """A file tagged through the Tag menu keeps its tag after the label review's move; a view of a prediction rule
    saved through the Views menu selects on the command line (`--view`) the files the tab shows."""
    from vitstudio.core.folder.views import read_tags
    from vitstudio.gui.folder import folder_sorting

    folder = window.folder
    rows = folder.visible_rows()
    path = next(folder.results.paths[r] for r in rows if f"{first}/0/" in folder.results.paths[r])
    folder.table.selectRow(next(i for i, r in enumerate(rows) if folder.results.paths[r] == path))
    monkeypatch.setattr(QInputDialog, "getItem", lambda *a, **k: ("keep", True))
    folder.tag_menus.tag_selection()
    assert read_tags(first, [path]) == {path.split(f"{first}/")[1]: ["keep"]}
    monkeypatch.setattr(folder_sorting.QMessageBox, "question", lambda *a, **k: QMessageBox.Ok)
    review = folder.side.page("review")  # the review's "Move to the suggested class…", its question answered Ok
    review.model.relabel(path, "3", review._ask_move)
    moved = path.replace(f"{first}/0/", f"{first}/3/")
    qtbot.waitUntil(lambda: moved in folder.results.paths, timeout=30000)
    settle(qtbot)
    assert folder.folder_tags.tags[folder.results.paths.index(moved)] == {"keep"}
    assert read_tags(first, [moved]) == {moved.split(f"{first}/")[1]: ["keep"]}

    label = folder.results.predicted_label(folder.results.paths.index(moved))
    folder.toolbar.predicted.setCurrentIndex(folder.toolbar.predicted.findText(label))
    shown = sorted(folder.results.paths[r] for r in folder.visible_rows())
    assert 0 < len(shown) < len(folder.results.paths)
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("predicted", True))
    folder.tag_menus.save_view()
    lines = _cli_json(capsys, ["predict", first, "--view", "predicted", "--json", "--quiet"])
    assert sorted(line["path"] for line in lines) == shown


def test_a_new_users_afternoon_in_the_window_at_1280_by_720(window, qtbot, tmp_path, monkeypatch, capsys):
    """The issue's new-user path, in the window as it first opens on a 1280×720 screen (1272×680, the Log a tab behind
    the Model card): Teach two classes from files and a third from a video (held frames), export, and
    `vitstudio predict --model EXPORT/run` on a file gives the Teach head's top class and probabilities (to 1e-4), the
    export's result (a long path) whole in sight, the tab not widened by the preview's caption;
    a stroke on the Paint page, another folder opened and the first again: the mask is back with its Undo; a file
    tagged through the Tag menu and moved by the label review keeps its tag (the tab's and the records'); a view of a
    Predicted filter saved through the Views menu selects the same files in `vitstudio predict FOLDER --view`.
    [window]
    """
    card = window.findChild(QDockWidget, "model_card_dock")
    assert [d.objectName() for d in window.tabifiedDockWidgets(card)] == ["log_dock"]
    window.resize(1272, 680)
    window.resizeDocks([card], [270], Qt.Horizontal)
    load_in_window(window, qtbot, str(bundled_demo()))
    _teach_and_export(window, qtbot, tmp_path, capsys)
    first = _paint_switch_and_back(window, qtbot, tmp_path)
    _tag_move_and_view(window, qtbot, first, monkeypatch, capsys)
