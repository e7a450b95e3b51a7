"""The Folder tab's Duplicates list: exact groups say "identical bytes", near groups their signals and lowest cosine,
each member's evidence on hover; picking a group emits its paths."""

from __future__ import annotations

from PySide6.QtGui import QImage

from vitstudio.core.folder.duplicates import DuplicateGroup, Member
from vitstudio.gui.folder.folder_review import DuplicatesTab


def test_groups_show_kind_and_every_members_evidence(qtbot):
    """Exact groups say "LEAK · 2 images (identical bytes)" ("WOULD LEAK" across a split the audit made up, as its
    report says), near groups their signals and lowest cosine; tooltip lists each member's hash/mirror/pixels/cosine;
    picking a row emits its paths.
    """
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
    tab.show_groups([exact, near], made_up_split=True)  # no val/ folder: a split the audit made up
    assert tab.item(1).text().startswith("WOULD LEAK · 2 images (identical bytes)")


def _ink(tab) -> int:
    """Pixels far from the list's background below its items: what is drawn in its empty space."""
    import numpy as np

    image = tab.viewport().grab().toImage().convertToFormat(QImage.Format_RGB888)
    pixels = np.frombuffer(image.constBits(), np.uint8, image.sizeInBytes()).reshape(image.height(), -1)
    background = tab.palette().base().color()
    below = tab.visualItemRect(tab.item(tab.count() - 1)).bottom() + 2 if tab.count() else 0
    return int((np.abs(pixels[below:, : image.width() * 3].astype(int) - background.lightness()) > 60).sum())


def test_an_empty_duplicates_tab_says_what_to_do_then_that_none_were_found(qtbot):
    """It showed nothing before a review and a lone "(all images)" when none was found: it read as broken.

    Before a review the empty list draws what to do, after a review without groups "No identical copies or
    near-duplicates" under "(all images)", nothing under a listed group (pixels below the items; the walk read both as
    broken).
    """
    from vitstudio.gui.folder.folder_review import DUPLICATES_HINT

    tab = DuplicatesTab()
    qtbot.addWidget(tab)
    tab.resize(300, 200)
    tab.show()
    assert tab.hint == DUPLICATES_HINT and _ink(tab) > 50  # the hint is drawn
    tab.show_groups([])
    assert tab.count() == 1 and tab.hint.startswith("No identical copies") and _ink(tab) > 50
    tab.show_groups([DuplicateGroup(("/d/a/x.png", "/d/b/x.png"), ("exact",), None, leak=False)])
    assert _ink(tab) == 0  # a group listed: no hint under it
    tab.clear()
    assert tab.hint == DUPLICATES_HINT
