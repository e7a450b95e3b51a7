"""The Folder tab's Undo: after a sort it removes the copies (keeping, and naming, one the user edited since) and
the class folders it created; after a label-review move it puts the file back. The move's undo log lives in the
app's data folder, never in the dataset. Both run as long jobs through the workers."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from tests.core.synthetic_data import tree_state
from tests.gui.test_folder_panel import _digits, _settle
from vitstudio.core.folder.sorting import review_journal_dir
from vitstudio.core.models.demo import bundled_demo


def _files(root: Path) -> dict:
    return {k: v for k, v in tree_state(root).items() if (root / k).is_file()}


def test_undo_last_sort_and_label_review_move(window, qtbot, tmp_path, monkeypatch):
    data = _digits(tmp_path, per_class=2)
    before = _files(data)
    messages = []
    window.state.message.connect(lambda level, text: messages.append((level, text)))
    with qtbot.waitSignal(window.state.model_loaded, timeout=30000):
        window.request_model(str(bundled_demo()))
    window.show_tab("folder")
    panel = window.folder
    panel.open_folder(str(data))
    _settle(qtbot)
    assert not panel.undo_button.isEnabled()

    out = tmp_path / "sorted"
    panel.run_sort(panel.sort_plan(str(out), 0.0, False, selected_only=False))
    _settle(qtbot)
    assert panel.undo_button.isEnabled() and len(list(out.rglob("*.png"))) == 20
    edited = sorted(out.rglob("*.png"))[0]
    edited.write_bytes(b"the user's edit")
    panel.undo_button.click()
    _settle(qtbot)
    assert [p for p in out.rglob("*") if p.is_file() and p.suffix != ".undone"] == [edited]
    assert sorted(p for p in out.iterdir() if p.is_dir()) == [edited.parent]  # the emptied folders are gone
    assert any(str(edited) in text and "changed since the sort" in text for _, text in messages)
    assert not panel.undo_button.isEnabled() and _files(data) == before

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Ok)
    path = data / "3" / sorted(p.name for p in (data / "3").iterdir())[0]
    panel._relabel(str(path), "new-class")
    _settle(qtbot)
    assert not path.exists() and (data / "new-class" / path.name).exists()
    assert not list(data.rglob("*.jsonl")) and list(review_journal_dir().glob("vitstudio-move-*.jsonl"))
    panel.undo_button.click()
    _settle(qtbot)
    assert _files(data) == before and not (data / "new-class").exists()
