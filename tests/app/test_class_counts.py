"""The Counts page's model (a Folder-tab page through the page protocol): images per class, predicted, given and
both, counted from a folder's results without Qt; counted again in the test with collections.Counter."""

from __future__ import annotations

from collections import Counter

import numpy as np

from vitstudio.app.folder_page import FolderPageModel
from vitstudio.app.pages.class_counts import ClassCounts
from vitstudio.core.folder.results import FolderResults


def _results(given, predicted, labels=("ant", "bee", "wasp")):
    n = len(given)
    return FolderResults(paths=tuple(f"/d/{i}.png" for i in range(n)), given=tuple(given),
                         predicted=np.asarray([labels.index(p) for p in predicted]), confidence=np.full(n, 0.9),
                         margin=np.full(n, 0.5), labels=labels)


def test_counts_are_the_folders_and_the_predictions_per_class():
    """Per class, predicted / given / both equal collections.Counter over the same labels; most images first; the
    summary names images outside class folders; `show(None)` leaves nothing; the model has every member
    `FolderPageModel` declares. The summary counts predicted classes and class folders apart, of the whole folder.
    """
    given = ["ant"] * 5 + ["bee"] * 3 + ["", ""]
    predicted = ["ant", "ant", "ant", "bee", "wasp", "bee", "bee", "ant", "wasp", "ant"]
    page, heard = ClassCounts(), []
    declared = {*FolderPageModel.__annotations__, "show"}  # what the Folder tab asks of every page's model
    assert declared == {"title", "tooltip", "show"} and all(getattr(page, name) for name in declared)
    page.changed.connect(heard.append)
    page.show(_results(given, predicted))
    by_name = {r.name: r for r in page.rows}
    want_predicted, want_given = Counter(predicted), Counter(g for g in given if g)
    both = Counter(g for g, p in zip(given, predicted, strict=True) if g and g == p)
    assert set(by_name) == set(want_predicted) | set(want_given)
    for name, row in by_name.items():
        assert (row.predicted, row.given, row.agree) == (want_predicted[name], want_given[name], both[name])
    assert [r.name for r in page.rows][0] == "ant" and heard == [page.rows]  # most images first, announced once
    assert page.summary() == "All 10 images of the folder: 3 classes predicted, 2 class folders, 2 images in none."
    page.show(None)  # another model or folder: nothing stays
    assert page.rows == () and heard[-1] == () and page.summary().startswith("Open a folder")
