"""The Folder tab's label review in words: cleanlab's count of wrong labels, how good the predictions behind it are,
and when those are too weak for the count to mean much."""

from __future__ import annotations


def review_summary(issues) -> str:
    """cleanlab's count, how good the predictions behind it are, and when that is too weak for the count to mean
    much, a warning beside it."""
    from vitstudio.core.folder.label_review import estimated_wrong, probe_accuracy

    if not issues:
        return ("No labels were reviewed: the review needs a folder of class folders (or labels given on the Labels "
                "tab) and a model.")
    probe = probe_accuracy(issues)
    text = (f"cleanlab estimates {estimated_wrong(issues)} of {len(issues)} labels are wrong (⚑, most doubtful "
            f"first); the probe's {probe.describe()}.")
    return text + (f"\n⚠ The count means little: {probe.caveat()}." if probe.weak else "")
