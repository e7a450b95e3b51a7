"""The Paint page's masks are work kept per folder (`app/pages/paint.py`, `PaintMasks.keep`/`restore`), driven with no
Qt: painted, another folder opened and this one again, they come back with their undo history; the app started again
(a new page, either before or after the folder opens) finds them in the app's records of the folder, never in the
folder, in the format `vitstudio segment --masks` reads; a mask whose image went is kept and said, not dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_paint_page import _paint_digit
from tests.core.synthetic_data import tree_state
from vitstudio.app.app_state import AppState
from vitstudio.app.folder_model import FolderModel
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.pages.paint import PaintPageModel
from vitstudio.core.dense.painted import match_painted
from vitstudio.core.files import dataset_dir
from vitstudio.core.models.demo import bundled_demo, render_digits


@pytest.fixture(scope="module")
def demo():
    from vitstudio.core.models.loading import load_model

    return load_model(str(bundled_demo()), None, "cpu", "fp32")


def _session(demo, data=None, page_first=True):
    """A new app's Folder model and Paint page (a restart), the page built before the folder opens (as the window
    builds its pages) or after."""
    app = AppState()
    app.set_model(demo)
    said = []
    app.message.connect(lambda level, text: said.append((level, text)))
    folder = FolderModel(app, ScriptRunner())
    page = PaintPageModel(folder) if page_first else None
    if data is not None:
        folder.open_paths([str(data)])
    return folder, page or PaintPageModel(folder), said


def test_painted_masks_come_back_after_another_folder_and_after_a_restart(demo, tmp_path):
    """Four digits painted (8 undo steps), another folder opened shows none of them, and this one again brings back
    the same masks with their undo history; an undo reaches the records on disk, which read back through
    `match_painted` (the format `segment --masks` reads) as the page's masks, and the dataset folder is untouched. A
    restart (the page built before or after the folder opens) finds the same masks and classes, saying nothing; an
    image gone leaves its mask in the records and one warning that names it."""
    data, other = render_digits(tmp_path / "digits", 1), render_digits(tmp_path / "other", 1)
    before = tree_state(data)
    folder, page, _ = _session(demo, data)
    paths = sorted(folder.results.paths)
    for path in paths[:4]:
        _paint_digit(page, folder, path)
    painted = {p: page.paint.mask(p).copy() for p in page.paint.painted()}
    steps = len(page.paint.undo_steps)
    assert len(painted) == 4 and steps == 8

    folder.open_paths([str(other)])  # another folder: its own (no) paint, nothing of this one's shown there
    assert page.paint.painted() == [] and not page.paint.undo_steps
    folder.open_paths([str(data)])  # and back: the same masks, and undo still offered
    assert sorted(page.paint.painted()) == sorted(painted)
    assert all((page.paint.mask(p) == m).all() for p, m in painted.items())
    assert len(page.paint.undo_steps) == steps
    page.undo()  # the last background drag goes, on disk too
    assert not (page.paint.mask(paths[3]) == painted[paths[3]]).all()

    records = dataset_dir(data) / "painted"
    kept = {m.image: m.labels for m in match_painted(records, paths)}  # the format `segment --masks` reads
    assert sorted(kept) == sorted(painted) and (kept[paths[3]] == page.paint.mask(paths[3])).all()
    page.redo()
    assert tree_state(data) == before  # nothing written into the dataset folder

    for page_first in (True, False):  # a restart: the page built before the folder opens, and after
        again, restarted, said = _session(demo, data, page_first)
        assert sorted(restarted.paint.painted()) == sorted(painted) and not said
        assert all((restarted.paint.mask(p) == m).all() for p, m in painted.items())
        assert restarted.paint.state.classes == page.paint.state.classes

    (data / paths[0]).unlink()  # an image gone: its mask stays in the records and the page says so
    _, restarted, said = _session(demo, data)
    assert sorted(restarted.paint.painted()) == sorted(paths[1:4])
    assert (records / f"{Path(paths[0]).stem}.png").exists() and len(said) == 1
    assert said[0][0] == "warning" and "1 painted mask" in said[0][1] and "gone" in said[0][1]


def test_a_move_takes_the_paint_its_records_and_its_undo_with_the_file(demo, tmp_path):
    """Files moved (a sort, the label review's move): the paint follows its image, in the records (the old PNG goes,
    the new one is found after a restart) and in the undo history (an undo after the move changes the moved image;
    it raised a KeyError on the old path)."""
    data = render_digits(tmp_path / "digits", 1)
    folder, page, _ = _session(demo, data)
    paths = sorted(folder.results.paths)
    _paint_digit(page, folder, paths[0])
    target = str(Path(paths[0]).parent.parent / "9" / "moved.png")
    Path(paths[0]).rename(target)
    folder.follow_moves({paths[0]: target})
    assert page.paint.painted() == [target]
    page.undo()  # the background drag, on the moved image
    assert set(page.paint.mask(target).ravel()) == {1, 255}
    records = dataset_dir(data) / "painted"
    assert sorted(p.name for p in records.glob("*.png")) == ["moved.png"]
    _, restarted, said = _session(demo, data)
    assert restarted.paint.painted() == [target] and not said
