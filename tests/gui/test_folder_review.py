"""The Label review tab states cleanlab's estimate of wrong labels and marks the flagged images."""

from __future__ import annotations

from vitstudio.core.folder.label_review import LabelIssue
from vitstudio.gui.folder.folder_review import REVIEW_HINT, ReviewTab


def test_review_tab_shows_the_estimated_count_and_flags(qtbot, tmp_path):
    """Summary "cleanlab estimates 2 of 6 labels are wrong", only flagged/other-class items shown, flagged ones marked
    ⚑; clear empties it. Before a review (and after clear) the summary says what the tab is for; a review with nothing
    to review says why.
    """
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


def test_review_tab_states_the_probe_accuracy_and_warns_when_the_count_means_little(qtbot, tmp_path):
    """The issue's clean ant/bee folder: a probe right on 65 % of the labels and cleanlab flagging 7 of 20. The count
    is shown with the accuracy behind it and, below 85 %, a warning beside it; an accurate probe gets none."""
    tab = ReviewTab()
    qtbot.addWidget(tab)

    def issues(wrong_guesses: int) -> list[LabelIssue]:
        given = ["ants" if k % 2 else "bees" for k in range(20)]
        return [LabelIssue(str(tmp_path / f"{k}.png"), g, ({"ants": "bees", "bees": "ants"}[g] if k < wrong_guesses
                                                            else g), k / 20, k / 20, k < 7)
                for k, g in enumerate(given)]

    tab.show_issues(issues(7))
    text = tab.summary.text()
    assert "cleanlab estimates 7 of 20 labels are wrong" in text
    assert "out-of-fold accuracy 65 % (ants 70 %, bees 60 %)" in text
    assert "⚠ The count means little: below 85 % accuracy per class" in text
    tab.show_issues(issues(1))
    assert "(ants 100 %, bees 90 %)" in tab.summary.text() and "⚠" not in tab.summary.text()
