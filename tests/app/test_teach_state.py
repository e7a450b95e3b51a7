"""The Teach tab's model without Qt (issue 51): hold to record keeps frames at the project's rate by their own times,
each change bumps the refit's key, and the project opens again after a restart as it was left."""

from __future__ import annotations

import numpy as np

from vitstudio.app.teach_state import HeldFrames, TeachModel


def test_held_frames_keep_the_rate_by_their_own_times_and_the_limit():
    """Hold to record keeps 24 of a 60 frames/s second (never two neighbours), every frame of a slower source, at most
    the limit.
    """
    at_60 = HeldFrames(24.0)
    kept = [i for i in range(60) if at_60.offer(i / 60, i)]  # one second of a 60 frames/s source
    assert len(kept) == 24 and all(np.diff(kept) >= 2)  # 24 of them, never two neighbours
    slow = HeldFrames(24.0)
    assert sum(slow.offer(i / 10, i) for i in range(10)) == 10  # a 10 frames/s source: every frame, no duplicate
    limited = HeldFrames(24.0, limit=5)
    assert sum(limited.offer(i / 24, i) for i in range(48)) == 5


def test_each_change_is_a_new_refit_and_the_project_reopens_as_left(tmp_path):
    """Adding a class, frames held and released (12 of half a second), a recipe change, augmentation switched on (off by
    default): each a new refit request; the project reopens after a restart with its recipe, augmentation, samples and
    thumbnails; opening another project drops the live head.
    """
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


def test_a_full_disk_or_a_camera_gone_while_recording_is_one_line_and_loses_nothing(tmp_path, monkeypatch):
    """The disk fills on the fifth of ten frames held (the real atomic write's fault point: the kernel's ENOSPC after
    the temporary file, before its rename): one line says 4 of 10 were added; the class keeps its earlier samples and
    the four, each a whole PNG, no temporary file left, labels.csv listing them. A camera gone mid-recording: the
    frames so far join the class, said in one line with why.

    The disk fills on the 5th of 10 frames held (`VITSTUDIO_FULL_AT` at the atomic write's rename: the kernel's ENOSPC):
    one line says 4 of 10 were added; the class keeps its 3 earlier samples and the 4 (file names = the frames' PNG
    hashes, computed here; no .tmp left, each opens whole), labels.csv lists them; a camera gone mid-recording: the 5
    frames held join the class, one line with why; nothing held, nothing said.
    """
    import hashlib
    import io

    from PIL import Image

    from vitstudio.core.data.labels_file import read_labels_file

    def frame(i: int) -> np.ndarray:
        return np.full((12, 16, 3), (7 * i, 90, 200 - 9 * i), np.uint8)

    def png_name(array: np.ndarray) -> str:  # the name add_images gives a frame: its PNG's content hash
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG")
        return hashlib.sha1(buffer.getvalue()).hexdigest()[:16] + ".png"

    teach = TeachModel()
    teach.open(tmp_path / "p")
    teach.add_class("cat")
    teach.add_frames("cat", [frame(i) for i in range(20, 23)])
    earlier = set(teach.project.samples["cat"])
    teach.hold("cat")
    assert all(teach.offer(float(i), frame(i)) for i in range(10))
    monkeypatch.setenv("VITSTUDIO_FULL_AT", f"before-rename-{png_name(frame(4))}")
    said = teach.finish_hold()
    monkeypatch.delenv("VITSTUDIO_FULL_AT")
    assert "\n" not in said and said.startswith("4 of 10 frames held were added to cat") and "No space left" in said
    cat = teach.project.root / "images" / "cat"
    assert earlier <= set(teach.project.samples["cat"]) and teach.cards()[0].count == 7
    assert sorted(p.name for p in cat.iterdir()) == sorted([png_name(frame(i)) for i in range(4)] +
                                                           [p.name for p in earlier])  # no .tmp left
    assert all(Image.open(p).size == (16, 12) for p in cat.iterdir())  # each a whole picture
    rows = read_labels_file(teach.project.root / "labels.csv").labelled
    assert sorted(p for p, _ in rows) == sorted(teach.project.samples["cat"])
    teach.add_class("dog")
    teach.hold("dog")
    for i in range(5):
        teach.offer(float(i), frame(40 + i))
    said = teach.finish_hold("The camera stopped sending frames (unplugged, or taken by another program)")
    assert said == "The camera stopped sending frames (unplugged, or taken by another program); 5 frames added to " \
                   "dog; teaching…"
    assert [c.count for c in teach.cards()] == [7, 5] and teach.finish_hold() is None


def test_a_project_records_the_model_it_was_taught_with(tmp_path, monkeypatch):
    """The model a head was taught with (spec as the model bar asked for it, and its --weights file) is written to the
    project's settings.json, paths made absolute, and is there after a restart; a plain class-folder tree is not
    written to; another model replaces it."""
    from types import SimpleNamespace

    from vitstudio.app.app_state import AppState
    from vitstudio.app.teach_state import app_model_spec
    from vitstudio.core.teach.project import read_settings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.safetensors").write_bytes(b"0")
    app = AppState()
    app.request_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3", weights="w.safetensors")
    app.set_model(SimpleNamespace(uid=-1, name="custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3"))
    teach = TeachModel()
    teach.open(tmp_path / "p")
    teach.add_class("cat")
    assert read_settings(tmp_path / "p").model is None  # nothing taught yet
    teach.taught_with(*app_model_spec(app))
    again = read_settings(tmp_path / "p")
    assert again.model == "custom:img=32,patch=8,width=32,depth=2,heads=2,classes=3"
    assert again.weights == str(tmp_path / "w.safetensors")  # absolute: the CLI may run from another folder
    teach.set_recipe("teachable-machine")  # a later setting keeps the model
    assert read_settings(tmp_path / "p").model == again.model
    app.set_model(SimpleNamespace(uid=-2, name="vit_tiny_patch16_224"))  # set directly (a script): by its name
    teach.taught_with(*app_model_spec(app))
    assert (read_settings(tmp_path / "p").model, read_settings(tmp_path / "p").weights) == ("vit_tiny_patch16_224",
                                                                                          None)
    plain = tmp_path / "folders"
    for name in ("a", "b"):
        (plain / name).mkdir(parents=True)
    teach.open(plain)
    teach.taught_with("vit_tiny_patch16_224")
    assert sorted(p.name for p in plain.iterdir()) == ["a", "b"]


def test_a_sample_is_removed_a_class_renamed_or_deleted_and_a_taken_name_refused(tmp_path):
    """The card's actions on the model: removing one sample deletes its file alone; renaming a class moves its samples
    under the new name (labels.csv follows); deleting a class deletes its folder and samples; a class name already
    taken (case-folded, as a case-insensitive disk would merge them) is refused with one line for Add class and Rename
    (Add class silently did nothing); the class being recorded into is neither renamed nor deleted. Each change is a
    new refit request."""
    from vitstudio.core.data.labels_file import read_labels_file

    teach = TeachModel()
    teach.open(tmp_path / "p")
    for name in ("cat", "dog"):
        teach.add_class(name)
        teach.add_frames(name, [np.full((12, 16, 3), (30 * i, len(name) * 9, 7), np.uint8) for i in range(4)])
    requests = {teach.refit_request()}
    images = tmp_path / "p" / "images"
    gone, *kept = teach.project.samples["cat"]
    teach.remove_sample(gone)
    requests.add(teach.refit_request())
    assert not gone.exists() and teach.project.samples["cat"] == tuple(kept) and teach.cards()[0].count == 3
    for name in ("dog", "Dog"):
        assert teach.attempt(teach.add_class, name) == "a class named 'dog' exists already: choose another name."
    assert teach.attempt(teach.rename_class, "cat", "DOG") == "a class named 'dog' exists already: choose another name."
    assert teach.project.classes == ("cat", "dog") and len(requests | {teach.refit_request()}) == 2  # no change
    teach.rename_class("cat", "kitten")
    requests.add(teach.refit_request())
    assert teach.project.classes == ("dog", "kitten") and not (images / "cat").exists()
    assert sorted(p.name for p in teach.project.samples["kitten"]) == sorted(p.name for p in kept)
    labels = read_labels_file(tmp_path / "p" / "labels.csv").labelled
    assert sorted({label for _, label in labels}) == ["dog", "kitten"] and len(labels) == 7
    teach.hold("dog")
    assert "release Hold to record first" in teach.attempt(teach.delete_class, "dog")
    teach.release()
    teach.delete_class("dog")
    requests.add(teach.refit_request())
    assert teach.project.classes == ("kitten",) and not (images / "dog").exists() and len(requests) == 4
    again = TeachModel()  # after a restart: as left
    again.open(tmp_path / "p")
    assert [(c.name, c.count) for c in again.cards()] == [("kitten", 3)]


def test_the_recipe_list_says_about_how_long_a_refit_takes(tmp_path, monkeypatch):
    """Teachable Machine's recipe took 11 s a refit (the quick head 0.06 s) and the list did not say so: each recipe's
    label gives a refit's expected time for the project's samples, following the samples and augmentation (its
    steps: 50 epochs of batches of 16 over the 85 % trained on, times three views when augmented)."""
    from vitstudio.core.teach import recipes

    teach = TeachModel()
    teach.open(tmp_path / "p")
    teach.add_class("cat")
    assert teach.state.fields()["recipe"].labels == ("Quick head (L-BFGS) · <1 s a refit",
                                                     "Teachable Machine's recipe · <1 s a refit")
    monkeypatch.setattr(recipes, "TM_STEP_S", 0.01)  # a slow machine: the time shows
    teach.add_frames("cat", [np.full((8, 8, 3), i, np.uint8) for i in range(40)])  # 34 trained on: 3 batches
    assert teach.state.fields()["recipe"].labels[1] == "Teachable Machine's recipe · ~2 s a refit"  # 50 × 3 × 0.01
    teach.set_augment(True)  # 102 views: 7 batches
    assert teach.state.fields()["recipe"].labels == ("Quick head (L-BFGS) · <1 s a refit",
                                                     "Teachable Machine's recipe · ~4 s a refit")
    assert teach.state.recipe == "quick"  # relabelled, not changed
