"""The label review of a folder (core/folder/audit.py): flipped labels rank at the top, and labels given apart from
the folders (the GUI's Labels tab, `audit --labels` over DATA_DIR) are the ones reviewed. Split from test_folder.py,
with the same fixtures (tests/core/conftest.py: the demo model, 300 digit scans)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np

from tests.core.generators import drain as run
from tests.core.synthetic_data import tree_state
from vitstudio.core.folder.audit import audit
from vitstudio.core.models.demo import bundled_demo


def test_flipped_labels_rank_at_the_top_of_the_review(demo, digits, tmp_path):
    """15 flipped digit labels: ≥ 80 % in the top 30 label issues; the first is flipped with a different suggestion and
    quality < 0.5.
    """
    data = tmp_path / "data"
    shutil.copytree(digits, data)
    rng = np.random.default_rng(0)
    files = sorted(data.rglob("*.png"))
    flipped = set()
    for i in rng.choice(len(files), 15, replace=False):  # 5 % of the images moved to a wrong class folder
        src = files[i]
        wrong = str((int(src.parent.name) + int(rng.integers(1, 10))) % 10)
        dst = data / wrong / f"flipped-{src.name}"
        os.replace(src, dst)
        flipped.add(str(dst))
    report = run(audit(data, demo, threshold=0.9999))
    top = {i.path for i in report.label_issues[:30]}
    recall = len(flipped & top) / len(flipped)
    assert recall >= 0.8, recall
    first = report.label_issues[0]
    assert first.path in flipped and first.suggested != first.given and first.quality < 0.5



def test_labels_given_apart_from_the_folders_are_the_ones_reviewed(demo, digits, tmp_path, capsys, monkeypatch):
    """The same 5 % of wrong labels, given apart from the folders (the GUI's Labels tab) with no file moved: the review
    reads them, not the folders, and ranks them as high.

    The same 15 wrong labels given apart from the folders (the Labels tab; `audit(given_apart=)`), no file moved: each
    issue's given label is the one given, ≥ 12 of them in the top 30, the report's note counts them, the folder
    untouched; `vitstudio audit DATA_DIR --labels FILE` (the Labels tab's file) gives the same given labels in its JSON.
    """
    before = tree_state(digits)
    rng = np.random.default_rng(0)
    files = sorted(digits.rglob("*.png"))
    given = {str(files[i]): str((int(files[i].parent.name) + int(rng.integers(1, 10))) % 10)
             for i in rng.choice(len(files), 15, replace=False)}
    report = run(audit(digits, demo, threshold=0.9999, given_apart=given))
    issues = {i.path: i for i in report.label_issues}
    assert all(issues[path].given == label for path, label in given.items())
    assert len(set(given) & {i.path for i in report.label_issues[:30]}) >= 12
    assert "15 label(s) given apart from the folders" in " ".join(report.notes)
    # the command line: DATA_DIR with --labels (the Labels tab's file) reviews the same labels
    from vitstudio.cli import main
    from vitstudio.core.train.labelling import save_labels

    labels_csv = tmp_path / "labels.csv"
    save_labels(labels_csv, given, [str(p) for p in files])
    monkeypatch.chdir(digits.parent)  # DATA_DIR relative, the labels file's paths absolute: the same images
    assert main(["audit", digits.name, "--labels", str(labels_csv), "--model", str(bundled_demo()), "--json",
                 "--threshold", "0.9999", "--quiet", "--top", "1000"]) == 0
    cli = {os.path.abspath(i["path"]): i["given"] for i in json.loads(capsys.readouterr().out)["label_issues"]}
    assert all(cli[path] == label for path, label in given.items())
    assert tree_state(digits) == before
