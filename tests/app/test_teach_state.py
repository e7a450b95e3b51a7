"""The Teach tab's model without Qt (issue 51): hold to record keeps frames at the project's rate by their own times,
each change bumps the refit's key, and the project opens again after a restart as it was left."""

from __future__ import annotations

import numpy as np

from vitstudio.app.teach_state import HeldFrames, TeachModel


def test_held_frames_keep_the_rate_by_their_own_times_and_the_limit():
    at_60 = HeldFrames(24.0)
    kept = [i for i in range(60) if at_60.offer(i / 60, i)]  # one second of a 60 frames/s source
    assert len(kept) == 24 and all(np.diff(kept) >= 2)  # 24 of them, never two neighbours
    slow = HeldFrames(24.0)
    assert sum(slow.offer(i / 10, i) for i in range(10)) == 10  # a 10 frames/s source: every frame, no duplicate
    limited = HeldFrames(24.0, limit=5)
    assert sum(limited.offer(i / 24, i) for i in range(48)) == 5


def test_each_change_is_a_new_refit_and_the_project_reopens_as_left(tmp_path):
    teach = TeachModel()
    teach.open(tmp_path / "p")
    requests = [teach.refit_request()]
    for name in ("cat", "dog"):
        teach.add_class(name)
        requests.append(teach.refit_request())
    teach.hold("cat")
    for i in range(30):  # half a second at 60 frames/s: 12 frames kept
        teach.offer(i / 60, np.full((12, 16, 3), 8 * i, np.uint8))
    assert teach.release() == 12 and teach.state.record_to is None and teach.release() == 0
    requests.append(teach.refit_request())
    teach.set_recipe("teachable-machine")
    requests.append(teach.refit_request())
    assert teach.state.augment is False  # augmentation off by default, as the anchors
    teach.set_augment(True)
    requests.append(teach.refit_request())
    assert len(set(requests)) == len(requests)  # every change asks for its own refit: an older one is discarded
    assert [(c.name, c.count) for c in teach.cards()] == [("cat", 12), ("dog", 0)]
    again = TeachModel()  # after a restart
    again.open(tmp_path / "p")
    assert again.state.recipe == "teachable-machine" and again.project.samples == teach.project.samples
    assert again.state.augment is True and again.project.settings.augment is True
    assert len(again.cards()[0].thumbnails) == 6
    again.live_head = ("cat", "dog"), object()
    again.open(tmp_path / "other")  # another project: the head taught on the previous one is dropped
    assert again.live_head is None and again.cards() == [] and again.refit_request() != requests[-1]
