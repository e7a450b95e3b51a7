"""The Label review page states cleanlab's estimate of wrong labels and marks the flagged images."""

from __future__ import annotations

import pytest

from vitstudio.app.app_state import AppState
from vitstudio.app.folder_model import FolderModel
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.pages.label_review import LabelReviewModel
from vitstudio.core.folder.label_review import LabelIssue
from vitstudio.gui.folder.pages.label_review_page import REVIEW_HINT, LabelReviewPage


@pytest.fixture
def page(qtbot):
    """The page on its model, over a Folder model with nothing open."""
    view = LabelReviewPage(LabelReviewModel(FolderModel(AppState(), ScriptRunner())))
    qtbot.addWidget(view)
    return view


def test_review_tab_shows_the_estimated_count_and_flags(page, tmp_path):
    """Summary "cleanlab estimates 2 of 6 labels are wrong", only flagged/other-class items shown, flagged ones marked
    ⚑; no results leave it empty. Before a review (and after its results go) the summary says what the page is for; a
    review with nothing to review says why.
    """
    assert page.summary.text() == REVIEW_HINT  # before a review: what to do, not an empty pane (the walk)
    issues = [LabelIssue(str(tmp_path / f"{k}.png"), "3", "5" if k < 3 else "3", k / 10, k / 10, k < 2)
              for k in range(6)]
    page.model.show_issues(issues)
    assert "cleanlab estimates 2 of 6 labels are wrong" in page.summary.text()
    assert [i.path for i in page.model.issues] == [i.path for i in issues[:3]]  # flagged or another class suggested
    assert [page.list.item(k).text().startswith("⚑") for k in range(3)] == [True, True, False]
    assert page.list.currentRow() == 0 and page.relabel_button.isEnabled()  # the most doubtful, ready to act on
    page.model.show(None)
    assert page.summary.text() == REVIEW_HINT and page.list.count() == 0 and not page.relabel_button.isEnabled()
    page.model.show_issues([])
    assert page.summary.text().startswith("No labels were reviewed")


def test_review_tab_states_the_probe_accuracy_and_warns_when_the_count_means_little(page, tmp_path):
    """The issue's clean ant/bee folder: a probe right on 65 % of the labels and cleanlab flagging 7 of 20. The count
    is shown with the accuracy behind it and, below 85 %, a warning beside it; an accurate probe gets none."""

    def issues(wrong_guesses: int) -> list[LabelIssue]:
        given = ["ants" if k % 2 else "bees" for k in range(20)]
        return [LabelIssue(str(tmp_path / f"{k}.png"), g, ({"ants": "bees", "bees": "ants"}[g] if k < wrong_guesses
                                                            else g), k / 20, k / 20, k < 7)
                for k, g in enumerate(given)]

    page.model.show_issues(issues(7))
    text = page.summary.text()
    assert "cleanlab estimates 7 of 20 labels are wrong" in text
    assert "out-of-fold accuracy 65 % (ants 70 %, bees 60 %)" in text
    assert "⚠ The count means little: below 85 % accuracy per class" in text
    page.model.show_issues(issues(1))
    assert "(ants 100 %, bees 90 %)" in page.summary.text() and "⚠" not in page.summary.text()
