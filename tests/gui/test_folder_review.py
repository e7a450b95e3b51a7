"""The Label review tab states cleanlab's estimate of wrong labels and marks the flagged images."""

from __future__ import annotations

from vitstudio.core.folder.label_review import LabelIssue
from vitstudio.gui.folder.folder_review import REVIEW_HINT, ReviewTab


def test_review_tab_shows_the_estimated_count_and_flags(qtbot, tmp_path):
    tab = ReviewTab()
    qtbot.addWidget(tab)
    assert tab.summary.text() == REVIEW_HINT  # before a review: what to do, not an empty pane (the walk)
    issues = [LabelIssue(str(tmp_path / f"{k}.png"), "3", "5" if k < 3 else "3", k / 10, k / 10, k < 2)
              for k in range(6)]
    shown = tab.show_issues(issues)
    assert "cleanlab estimates 2 of 6 labels are wrong" in tab.summary.text()
    assert [i.path for i in shown] == [i.path for i in issues[:3]]  # flagged or another class suggested
    assert [tab.list.item(k).text().startswith("⚑") for k in range(3)] == [True, True, False]
    tab.clear()
    assert tab.summary.text() == REVIEW_HINT and tab.list.count() == 0
    tab.show_issues([])
    assert tab.summary.text().startswith("No labels were reviewed")
