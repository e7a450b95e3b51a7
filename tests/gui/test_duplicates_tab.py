"""The Folder tab's Duplicates list: exact groups say "identical bytes", near groups their signals and lowest cosine,
each member's evidence on hover; picking a group emits its paths."""

from __future__ import annotations

from vitstudio.core.folder.duplicates import DuplicateGroup, Member
from vitstudio.gui.folder.folder_review import DuplicatesTab


def test_groups_show_kind_and_every_members_evidence(qtbot):
    tab = DuplicatesTab()
    qtbot.addWidget(tab)
    exact = DuplicateGroup(("/d/a/x.png", "/d/b/x.png"), ("exact",), None, leak=True)
    members = (Member("/d/a/y.png", 0, False, 1.0, 1.0, ()),
               Member("/d/b/y-mirror.png", 2, True, 0.99871, 0.998712, ("phash", "pixels")))
    near = DuplicateGroup(tuple(m.path for m in members), ("phash", "pixels"), 0.998712, False, members)
    tab.show_groups([exact, near])
    assert tab.count() == 3
    assert tab.item(1).text().startswith("LEAK · 2 images (identical bytes)")
    assert "phash + pixels, cosine ≥ 0.9987" in tab.item(2).text()
    tip = tab.item(2).toolTip()
    assert "/d/b/y-mirror.png: hash 2 (mirrored), pixels 0.9987, cosine 0.99871" in tip
    with qtbot.waitSignal(tab.group_picked) as picked:
        tab.setCurrentRow(2)
    assert picked.args == [near.paths]
