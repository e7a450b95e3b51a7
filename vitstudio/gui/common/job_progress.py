"""A long job's Progress record on a bar and a line of text (the Layers pages of the Folder and Compare tabs)."""

from __future__ import annotations


def show_progress(bar, note, progress) -> None:
    """`progress`: a core `jobs.Progress` (done of total, message); an unknown total keeps the bar busy."""
    bar.setRange(0, max(1, progress.total))
    bar.setValue(progress.done)
    note.setText(progress.message)
